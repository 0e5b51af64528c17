// What every controller integration test runs: the in-memory API seeded with a node-plugin pod
// (with a pod IP, as a kubelet would report it), PVs and their VolumeAttachments; the driver-stub
// and the sidecar as real processes. The controller is started by each test.
import { startKubeApi, type KubeApi, type KubeApiOptions } from "../kube/index.js";
import { restartDriverStub, startDriverStub, type DriverStub, type StubState } from "./driver-stub.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "./sidecar.js";
import { waitFor } from "./wait.js";
import { TLS_CLIENT_OPTIONS, checkHealth, tlsCredentials, type TlsFiles } from "./secure-sidecar.js";
import {
  CSI_ADDONS_NODE_NAME,
  HANDLED_RESTART,
  NAMESPACE,
  csiDriver,
  daemonSet,
  namespace,
  node,
  onLocalhost,
  pod,
  pv,
  upstreamCrdFile,
  userPod,
  volumeAttachment,
} from "./fixtures.js";

export const CAN = "csiaddons.openshift.io/v1alpha1";
export const HANDLED = HANDLED_RESTART;
export const POD_UID_ANNOTATION = "sidecar.csiaddons.openshift.io/createdByPodUID";
export const RESTARTED_AT = "sidecar.csiaddons.openshift.io/driverRestartedAt";

export type Volumes = Record<string, NonNullable<StubState["volumes"]>[string]>;

export interface StackOptions {
  /** PV name → the driver's volume state (the handle is `handle-<pv>`). */
  volumes: Volumes;
  stub?: Omit<StubState, "volumes">;
  sidecarArgs?: string[];
  kube?: Omit<KubeApiOptions, "seed" | "crdFiles">;
  /** PVs with volumeMode Block. */
  block?: string[];
  /** Claims bound to PVs: PV name → claim name (namespace csi). */
  claims?: Record<string, string>;
  /**
   * PVs of a driver without attach: no VolumeAttachment and, as on a real cluster, not in the
   * Node's volumesInUse; a running Pod on the node mounts each one's claim (`claim-<pv>` unless
   * `claims` names it).
   */
  withoutAttach?: string[];
  /** The sidecar serves TLS with these files (auth on through sidecarArgs); health is checked over TLS. */
  tls?: TlsFiles;
  /** Seed objects added to the standard ones. */
  extra?: unknown[];
}

export interface Stack {
  kube: KubeApi;
  stub: DriverStub;
  sidecar: SidecarProc | undefined;
  pvs: string[];
  startSidecar(): Promise<SidecarProc>;
  /** SIGKILL the driver and start it again (new boot id, same volumes). */
  crashDriver(): Promise<void>;
  /** SIGKILL the driver and start it again with these flags (e.g. --no-boot-id); waits for nothing else. */
  replaceDriver(extraArgs?: string[]): Promise<void>;
  /** NodeHealVolume calls the driver received for a PV. */
  heals(pvName: string): number;
  healthChecks(pvName: string): number;
  csiAddonsNode(): Record<string, any> | undefined;
  annotation(key: string): string | undefined;
  /** Waits until the controller recorded the sidecar's current restart marker. */
  waitHandled(timeoutMs?: number): Promise<string>;
  stop(): Promise<void>;
}

export const handleOf = (pvName: string) => `handle-${pvName}`;

/** A Pod as a kubelet reports it once started (status.startTime: now). */
export function started(p: Record<string, any>): Record<string, any> {
  return { ...p, status: { ...p.status, startTime: new Date().toISOString() } };
}

export function runningPod(uid?: string): Record<string, any> {
  const p = pod() as Record<string, any>;
  return onLocalhost(uid ? { ...p, metadata: { ...p.metadata, uid } } : p);
}

export async function startStack(o: StackOptions): Promise<Stack> {
  const pvs = Object.keys(o.volumes).sort();
  const claimOf = (name: string) => o.claims?.[name] ?? `claim-${name}`;
  const seed = [
    namespace(),
    daemonSet(),
    runningPod(),
    node(),
    ...pvs.flatMap((name) => {
      const block = o.block?.includes(name);
      if (o.withoutAttach?.includes(name)) return [pv(name, { claim: claimOf(name), block }), started(userPod(`app-${name}`, [claimOf(name)]))];
      return [pv(name, { claim: o.claims?.[name], block }), volumeAttachment(name, handleOf(name))];
    }),
    // A driver without attach says so on its CSIDriver: only then are the node's Pods listed.
    ...(o.withoutAttach?.length ? [csiDriver(false)] : []),
    ...(o.extra ?? []),
  ];
  const kube = await startKubeApi({ crdFiles: [upstreamCrdFile], seed, ...o.kube });
  let stub = await startDriverStub({
    state: { ...o.stub, volumes: Object.fromEntries(pvs.map((name) => [handleOf(name), o.volumes[name]!])) },
  });
  const methodCalls = (method: string, pvName: string) => stub.calls({ method, volumeId: handleOf(pvName) }).length;
  const stack: Stack = {
    kube,
    get stub() {
      return stub;
    },
    sidecar: undefined,
    pvs,
    async startSidecar() {
      stack.sidecar = await startSidecarProc({ driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath, args: o.sidecarArgs });
      const sc = stack.sidecar;
      if (o.tls) {
        const tls = o.tls;
        await waitFor("the sidecar SERVING over TLS", async () => (await checkHealth(sc.address, tlsCredentials(tls), TLS_CLIENT_OPTIONS)) === "SERVING", {
          timeoutMs: 30_000,
        });
      } else {
        await waitHealth(sc, "SERVING", 30_000);
      }
      return stack.sidecar;
    },
    async replaceDriver(extraArgs = []) {
      await stub.kill();
      stub = await restartDriverStub(stub, { extraArgs });
    },
    async crashDriver() {
      const before = stack.annotation(RESTARTED_AT);
      await stub.kill();
      stub = await restartDriverStub(stub);
      await waitFor("the sidecar to record the driver restart", () => stack.annotation(RESTARTED_AT) !== before, { timeoutMs: 30_000 });
    },
    heals: (pvName) => methodCalls("NodeHealVolume", pvName),
    healthChecks: (pvName) => methodCalls("NodeGetVolumeHealth", pvName),
    csiAddonsNode: () => kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as Record<string, any> | undefined,
    annotation: (key) => stack.csiAddonsNode()?.metadata?.annotations?.[key],
    waitHandled(timeoutMs = 60_000) {
      return waitFor(
        "the controller to record the handled restart",
        () => {
          const a = stack.csiAddonsNode()?.metadata?.annotations ?? {};
          const reconnected = a["sidecar.csiaddons.openshift.io/driverReconnectedAt"];
          const marker = `${a[POD_UID_ANNOTATION] ?? ""}+${a[RESTARTED_AT] ?? ""}${reconnected === undefined ? "" : `+${reconnected}`}`;
          return a[HANDLED] === marker ? marker : undefined;
        },
        { timeoutMs },
      );
    },
    async stop() {
      await stack.sidecar?.stop();
      await stub.stop();
      await kube.stop();
    },
  };
  return stack;
}

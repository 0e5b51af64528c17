// `npm run demo [-- --hold] [-- --keep]`: the whole healing loop on this machine. The in-memory
// Kubernetes API runs in this process; the driver-stub and the sidecar run as real processes on
// real sockets; this program plays the healer controller over gRPC and tells what happens.
// Exit 0 only when every step behaved; otherwise 1 and the step that did not. Everything started
// is stopped on the way out, also on failure and on Ctrl-C.
import { rmSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { startKubeApi, type KubeApi } from "../kube/index.js";
import { restartDriverStub, startDriverStub, type DriverStub } from "../support/driver-stub.js";
import { CSI_ADDONS_NODE_NAME, NAMESPACE, NODE, POD, ourCrdFile } from "../support/fixtures.js";
import { call, codeName } from "../support/grpc.js";
import { tempDir } from "../support/proc.js";
import { waitFor } from "../support/wait.js";
import { Capability, IdentityClient } from "../../proto/gen/identity/identity.js";
import { HealVolumeRequest_Mode as Mode, VolumeHealerClient, healVolumeRequest_ModeToJSON as modeName } from "../../proto/gen/sidecar/v1/healer.js";
import {
  NodeHealVolumeResponse_Result as Result,
  VolumeHealth_State as State,
  nodeHealVolumeResponse_ResultToJSON as resultName,
  volumeHealth_StateToJSON as stateName,
  type VolumeHealth,
} from "../../proto/gen/healer/v1/healer.js";
import { DEAD_MOUNT, DRIVER, STAGE_SECRET, VOLUMES, healthyState, seedObjects } from "./cluster.js";
import { Cleanup, spawnSidecar, type SidecarProcess } from "./processes.js";
import { Story } from "./story.js";
import { formatTable } from "./table.js";

const USAGE = `usage: npm run demo [-- --hold] [-- --keep]
  --hold   keep everything running after the story, until Ctrl-C (to look around with kubectl or grpcurl)
  --keep   keep the temporary directory (sockets, driver state, sidecar log) after a successful run
`;

const CAN = "csiaddons.openshift.io/v1alpha1";
const RESTARTED_AT = "sidecar.csiaddons.openshift.io/driverRestartedAt";
const STEPS = 9;

function parseArgs(argv: string[]): { hold: boolean; keep: boolean } {
  const out = { hold: false, keep: false };
  for (const a of argv) {
    if (a === "--hold") out.hold = true;
    else if (a === "--keep") out.keep = true;
    else if (a === "--help" || a === "-h") {
      process.stdout.write(USAGE);
      process.exit(0);
    } else {
      process.stderr.write(`demo: unknown argument ${a}\n${USAGE}`);
      process.exit(2);
    }
  }
  return out;
}

const say = (line: string) => process.stdout.write(`${line}\n`);
/** "VolumeHealer HEAL_VOLUME" from { volumeHealer: { type: "HEAL_VOLUME" } }. */
const capabilityName = (c: Capability) =>
  Object.entries(Capability.toJSON(c) as Record<string, { type?: string }>)
    .map(([kind, v]) => `${kind[0]!.toUpperCase()}${kind.slice(1)} ${v.type ?? "UNKNOWN"}`)
    .join(" ") || "(empty)";
const healthText = (h: VolumeHealth | undefined) =>
  h ? `${stateName(h.state)}${h.reason ? ` (${h.reason})` : ""}` : "(no health in the answer)";

/** One row of the summary per volume: what the controller saw at each stage. */
type Row = Record<"start" | "fault" | "pass" | "restart" | "healAll" | "final", string>;

const cleanup = new Cleanup();

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  const started = Date.now();
  let passed = false;
  // Ctrl-C while holding after a good run is the normal way out: exit 0 then.
  cleanup.onSignal(say, () => (opts.hold && passed ? 0 : 130));
  const dir = tempDir("csi-healer-demo-");
  cleanup.add("temporary directory", () => {
    if (!passed || opts.keep) return say(`kept ${dir} (sidecar log, driver state file and call log)`);
    rmSync(dir, { recursive: true, force: true });
    say(`removed ${dir} (--keep keeps it)`);
  });
  const story: Story = new Story(STEPS, say, () => cleanup.interrupted);
  const rows = new Map<string, Row>(VOLUMES.map((v) => [v.pv, { start: "", fault: "-", pass: "", restart: "", healAll: "", final: "" }]));

  let kube: KubeApi;
  let stub: DriverStub;
  let sidecar: SidecarProcess;
  let healer: VolumeHealerClient;
  let identity: IdentityClient;

  const csiAddonsNode = () => kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as { metadata: { annotations?: Record<string, string> }; spec: { driver: Record<string, string> } } | undefined;
  const health = (pvName: string) => call(healer, healer.getVolumeHealth, { pvName });
  const heal = (pvName: string, mode: Mode) => call(healer, healer.healVolume, { pvName, mode });
  const driverHeals = () => stub.calls({ server: "addons", method: "NodeHealVolume" });
  const getIdentity = async () => {
    const r = await call(identity, identity.getIdentity, {});
    story.expect(r.ok, `GetIdentity through the sidecar failed: ${r.ok ? "" : `${codeName(r.code)} ${r.details}`}`);
    return r.value;
  };

  say("csi-addons-healer demo: a node plugin restarts, its user-space mounts die, and the healer brings them back.");
  say(`working directory (driver sockets and state, sidecar log): ${dir}`);

  const outcome = await cleanup.watch(story.run(async () => {
    story.step("Kubernetes: the in-memory API server, seeded like a small cluster");
    kube = await startKubeApi({ tls: true, crdFiles: [ourCrdFile], seed: seedObjects() });
    cleanup.add("in-memory Kubernetes API", () => kube.stop());
    story.line(`API server ${kube.url} (in this process; HTTPS with a throw-away certificate)`);
    story.line(`kubeconfig: ${kube.kubeconfigPath}`);
    story.line(`  watch along: kubectl --kubeconfig ${kube.kubeconfigPath} get csiaddonsnodes -n ${NAMESPACE} -o yaml`);
    story.line(`node ${NODE}, node-plugin pod ${NAMESPACE}/${POD} (DaemonSet csi-plugin), stage secret ${STAGE_SECRET.namespace}/${STAGE_SECRET.name}`);
    for (const v of VOLUMES) story.line(`PersistentVolume ${v.pv.padEnd(12)} volume ${v.handle.padEnd(13)} ${v.kind}, attached to ${NODE}`);
    story.expect(kube.list("v1", "PersistentVolume").length === VOLUMES.length, "the PVs are in the API");

    story.step("Driver: the driver-stub, a real CSI-Addons driver process");
    stub = await startDriverStub({ dir, state: healthyState() });
    cleanup.add("driver-stub", () => stub.stop());
    story.line(`driver ${stub.name}, pid ${stub.proc.child.pid}`);
    story.line(`CSI-Addons socket ${stub.addonsSocket} (the sidecar talks here)`);
    story.line(`CSI socket        ${stub.csiSocket} (the kubelet's; the sidecar never dials it)`);
    story.line(`state file ${stub.stateFile}: ${VOLUMES.length} volumes staged, all HEALTHY`);

    story.step("Sidecar: starts next to the driver and registers the node");
    sidecar = await spawnSidecar({ build: "source", driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath, logFile: join(dir, "sidecar.log") });
    cleanup.add("sidecar", () => sidecar.stop());
    story.line(`sidecar pid ${sidecar.pid}, controller port ${sidecar.address}, /healthz /readyz /metrics on 127.0.0.1:${sidecar.httpPort}`);
    story.line(`caller auth is OFF for this local demo (--enable-auth=false): plaintext gRPC, no token.`);
    story.line(`  In a cluster it is on: TLS, and every call needs a bearer token that TokenReview and SubjectAccessReview accept.`);
    story.line(`sidecar log (JSON lines): ${sidecar.logFile}`);
    await sidecar.waitReadyz(200);
    const ready = await sidecar.readyz();
    story.line(`/readyz 200 after ${((Date.now() - sidecar.spawnedAt) / 1000).toFixed(1)} s: ${ready.body}`);
    const node = csiAddonsNode();
    story.expect(node, `CSIAddonsNode ${NAMESPACE}/${CSI_ADDONS_NODE_NAME} exists`);
    story.expect(node.spec.driver["name"] === DRIVER, `CSIAddonsNode names driver ${DRIVER}`);
    story.line(`CSIAddonsNode ${NAMESPACE}/${CSI_ADDONS_NODE_NAME}: driver ${node.spec.driver["name"]}, endpoint ${node.spec.driver["endpoint"]}`);
    story.expect(node.metadata.annotations?.[RESTARTED_AT] === undefined, "no driver restart recorded yet");
    story.line(`no ${RESTARTED_AT} annotation yet: the driver has not restarted`);

    story.step("Controller: who is this driver, and can it heal? (identity pass-through)");
    healer = new VolumeHealerClient(sidecar.address, grpc.credentials.createInsecure());
    identity = new IdentityClient(sidecar.address, grpc.credentials.createInsecure());
    cleanup.add("gRPC clients", () => (healer.close(), identity.close()));
    const id = await getIdentity();
    story.expect(id.name === DRIVER, `GetIdentity names ${DRIVER}, got ${JSON.stringify(id.name)}`);
    const bootId = id.manifest["bootId"];
    story.line(`GetIdentity: ${id.name} ${id.vendorVersion}, boot id ${bootId}`);
    const caps = await call(identity, identity.getCapabilities, {});
    story.expect(caps.ok, "GetCapabilities through the sidecar answers");
    const names = caps.value.capabilities.map(capabilityName);
    story.line(`GetCapabilities (the driver's bytes, relayed untouched): ${names.join(", ")}`);
    story.expect(names.includes("VolumeHealer GET_VOLUME_HEALTH") && names.includes("VolumeHealer HEAL_VOLUME"), "the driver offers GET_VOLUME_HEALTH and HEAL_VOLUME");

    story.step("Controller: health of every volume on the node");
    for (const v of VOLUMES) {
      const r = await health(v.pv);
      story.expect(r.ok, `GetVolumeHealth ${v.pv} answers (${r.ok ? "" : `${codeName(r.code)}: ${r.details}`})`);
      story.line(`${v.pv.padEnd(12)} -> volume ${r.value.volumeId.padEnd(13)} ${healthText(r.value.health)}`);
      story.expect(r.value.health?.state === State.HEALTHY, `${v.pv} starts HEALTHY`);
      rows.get(v.pv)!.start = stateName(r.value.health!.state);
    }

    story.step("Fault: the user-space mount of pv-shared dies; a periodic IF_ABNORMAL pass heals it");
    const broken = VOLUMES[1]!;
    stub.updateState((s) => void (s.volumes![broken.handle] = { ...DEAD_MOUNT }));
    story.line(`(driver state file: ${broken.handle} ABNORMAL, ${DEAD_MOUNT.reason})`);
    const sick = await health(broken.pv);
    story.expect(sick.ok && sick.value.health?.state === State.ABNORMAL, `GetVolumeHealth ${broken.pv} reports ABNORMAL`);
    story.line(`GetVolumeHealth ${broken.pv}: ${healthText(sick.value.health)}: ${sick.value.health!.message}`);
    rows.get(broken.pv)!.fault = stateName(sick.value.health!.state);
    const healsBefore = driverHeals().length;
    for (const v of VOLUMES) {
      const r = await heal(v.pv, Mode.IF_ABNORMAL);
      story.expect(r.ok, `HealVolume ${v.pv} IF_ABNORMAL answers (${r.ok ? "" : `${codeName(r.code)}: ${r.details}`})`);
      const want = v === broken ? Result.HEALED : Result.NOT_NEEDED;
      story.expect(r.value.result === want, `HealVolume ${v.pv} IF_ABNORMAL is ${resultName(want)}, got ${resultName(r.value.result)}`);
      story.line(`HealVolume ${v.pv.padEnd(12)} IF_ABNORMAL -> ${resultName(r.value.result).padEnd(10)} now ${healthText(r.value.health)}`);
      rows.get(v.pv)!.pass = resultName(r.value.result);
    }
    const passHeals = driverHeals().slice(healsBefore);
    story.expect(passHeals.length === 1, `exactly one NodeHealVolume reached the driver, got ${passHeals.length}`);
    const req = passHeals[0]!.request as { stagingTargetPath: string; volumeCapability: { mount?: { fsType: string; mountFlags?: string[] }; accessMode: { mode: string } } };
    story.line(`the driver got one NodeHealVolume: staging path ${req.stagingTargetPath}`);
    story.line(`  capability mount ${req.volumeCapability.mount?.fsType} ${JSON.stringify(req.volumeCapability.mount?.mountFlags ?? [])}, ${req.volumeCapability.accessMode.mode} (all read from the PV, not from the caller)`);
    const after = await health(broken.pv);
    story.expect(after.ok && after.value.health?.state === State.HEALTHY, `${broken.pv} is HEALTHY after the heal`);

    story.step("Crash: the driver container dies (SIGKILL) and comes back");
    const oldPid = stub.proc.child.pid;
    const killedAt = new Date();
    await stub.kill();
    story.line(`killed driver-stub pid ${oldPid}; every user-space mount it served dies with it`);
    await sidecar.waitReadyz(503);
    story.line(`sidecar /readyz 503: ${(await sidecar.readyz()).body}`);
    const during = await health(VOLUMES[0]!.pv);
    story.expect(!during.ok && during.code === grpc.status.UNAVAILABLE, `calls fail fast with UNAVAILABLE while the driver is away, got ${during.ok ? "OK" : codeName(during.code)}`);
    story.line(`GetVolumeHealth ${VOLUMES[0]!.pv} meanwhile: ${codeName(during.code)} (fails fast, nothing hangs)`);
    // The new driver process starts with every mount dead (restartDriverStub writes the state first).
    stub = await restartDriverStub(stub, { state: { volumes: Object.fromEntries(VOLUMES.map((v) => [v.handle, { ...DEAD_MOUNT }])) } });
    cleanup.add("restarted driver-stub", () => stub.stop());
    story.line(`driver restarted: pid ${stub.proc.child.pid}; its state file now says all ${VOLUMES.length} mounts are dead`);
    await sidecar.waitReadyz(200);
    story.line(`sidecar reconnected by itself: /readyz 200`);
    const stamp = await waitFor("the CSIAddonsNode's driverRestartedAt annotation", () => csiAddonsNode()?.metadata.annotations?.[RESTARTED_AT]);
    story.expect(Date.parse(stamp) >= Math.floor(killedAt.getTime() / 1000) * 1000, `driverRestartedAt ${stamp} is not before the crash`);
    story.line(`CSIAddonsNode annotation ${RESTARTED_AT}: (none) -> ${stamp}`);
    const id2 = await getIdentity();
    story.expect(id2.manifest["bootId"] !== bootId, "the restarted driver has a new boot id");
    story.line(`GetIdentity: boot id ${bootId} -> ${id2.manifest["bootId"]}`);
    for (const v of VOLUMES) {
      const r = await health(v.pv);
      story.expect(r.ok && r.value.health?.state === State.ABNORMAL, `${v.pv} is ABNORMAL after the restart`);
      rows.get(v.pv)!.restart = stateName(r.value.health!.state);
    }
    story.line(`GetVolumeHealth: all ${VOLUMES.length} volumes ABNORMAL (${DEAD_MOUNT.reason})`);

    story.step("Controller: saw driverRestartedAt change, heals every volume of the node with ALWAYS");
    const attached = (kube.list("storage.k8s.io/v1", "VolumeAttachment") as { spec: { nodeName: string; source: { persistentVolumeName: string } } }[])
      .filter((va) => va.spec.nodeName === NODE)
      .map((va) => va.spec.source.persistentVolumeName)
      .sort();
    story.expect(attached.length === VOLUMES.length, `the controller finds ${VOLUMES.length} VolumeAttachments on ${NODE}`);
    story.line(`VolumeAttachments on ${NODE}: ${attached.join(", ")}; all at once:`);
    const t0 = Date.now();
    const results = await Promise.all(attached.map((pvName) => heal(pvName, Mode.ALWAYS)));
    story.line(`(${results.length} HealVolume ${modeName(Mode.ALWAYS)} calls answered in ${Date.now() - t0} ms)`);
    attached.forEach((pvName, i) => {
      const r = results[i]!;
      story.expect(r.ok && r.value.result === Result.HEALED, `HealVolume ${pvName} ALWAYS is HEALED, got ${r.ok ? resultName(r.value.result) : codeName(r.code)}`);
      story.line(`HealVolume ${pvName.padEnd(12)} ALWAYS -> ${resultName(r.value.result).padEnd(10)} now ${healthText(r.value.health)}`);
      rows.get(pvName)!.healAll = resultName(r.value.result);
    });
    const secretHeal = driverHeals().find((c) => (c.request as { volumeId: string }).volumeId === VOLUMES[0]!.handle && (c.request as { secrets?: object }).secrets);
    const secretKeys = Object.keys((secretHeal?.request as { secrets?: Record<string, string> } | undefined)?.secrets ?? {});
    story.expect(secretKeys.length > 0, `the driver got ${VOLUMES[0]!.pv}'s stage secret`);
    story.line(`${VOLUMES[0]!.pv}'s heal carried stage secret ${STAGE_SECRET.namespace}/${STAGE_SECRET.name} (keys ${secretKeys.join(", ")}; values never logged)`);

    story.step("Check: all healthy, and the kubelet's CSI socket untouched");
    for (const v of VOLUMES) {
      const r = await health(v.pv);
      story.expect(r.ok && r.value.health?.state === State.HEALTHY, `${v.pv} ends HEALTHY`);
      rows.get(v.pv)!.final = stateName(r.value.health!.state);
    }
    story.line(`GetVolumeHealth: all ${VOLUMES.length} volumes HEALTHY`);
    const csi = stub.csiCalls();
    story.expect(csi.length === 0, `the sidecar never called the driver's CSI socket, but it got ${csi.length} calls`);
    story.line(`calls on the driver's CSI socket (NodeStageVolume and friends belong to the kubelet): ${csi.length}`);
    const metrics = await sidecar.metrics();
    const healCount = /csi_sidecar_operations_seconds_count\{[^}]*method_name="\/healer\.v1\.VolumeHealerNode\/NodeHealVolume",grpc_status_code="OK"\}\s+(\d+)/.exec(metrics)?.[1];
    story.expect(healCount !== undefined, "/metrics counts the driver's NodeHealVolume calls");
    story.line(`/metrics: csi_sidecar_operations_seconds counted ${healCount} successful NodeHealVolume calls to the driver`);
  }));

  if (cleanup.interrupted) return new Promise(() => {}); // the signal handler cleans up and exits
  say("\nSummary");
  say(
    formatTable(
      ["PV", "volume", "kind", "start", "mount dies", "IF_ABNORMAL", "after crash", "ALWAYS", "end"],
      VOLUMES.map((v) => {
        const r = rows.get(v.pv)!;
        return [v.pv, v.handle, v.kind, r.start, r.fault, r.pass, r.restart, r.healAll, r.final].map((c) => c || "?");
      }),
    ),
  );
  if (outcome.failed) {
    say(`\nFAILED in step "${outcome.failed.step}": ${outcome.failed.reason}`);
    say(`(${outcome.checks} checks passed before that)`);
  } else {
    passed = true;
    say(`\nAll ${outcome.checks} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s.`);
  }

  if (opts.hold && passed) {
    say(`\nHolding: everything keeps running. Try:`);
    say(`  kubectl --kubeconfig ${kube!.kubeconfigPath} get csiaddonsnodes -n ${NAMESPACE} -o yaml`);
    say(`  grpcurl -plaintext ${sidecar!.address} list`);
    say(`  grpcurl -plaintext -d '{"pv_name":"pv-raw"}' ${sidecar!.address} sidecar.v1.VolumeHealer/GetVolumeHealth`);
    say(`  edit ${stub!.stateFile} to break a volume, then ask again`);
    say(`Press Ctrl-C to stop.`);
    return new Promise(() => {}); // Ctrl-C: the signal handler cleans up and exits 0
  }

  say("\nStopping everything this demo started ...");
  const failedCleanup = await cleanup.run();
  for (const f of failedCleanup) say(`cleanup failed: ${f}`);
  return passed && failedCleanup.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    process.stderr.write(`demo: ${err instanceof Error ? err.stack : String(err)}\n`);
    await cleanup.run();
    process.exit(1);
  },
);

// The cluster bench's simulated sidecars (cluster.ts): the sidecar's gRPC contract with the healer
// controller, served for many nodes by this one light process. Each node gets a gRPC server on a
// port of its own (the endpoint its CSIAddonsNode names), answering as a sidecar does:
// grpc.health.v1 SERVING, GetCapabilities with HEAL_VOLUME and GET_VOLUME_HEALTH, and HealVolume
// behind the sidecar's own auth (sidecar/auth/authenticator.ts: a TokenReview for the node's
// audience, a SubjectAccessReview for csiaddonsnodes/heal, with the sidecar's default flags),
// answered after the driver's time (ALWAYS: --heal-ms, HEALED; IF_ABNORMAL: --check-ms,
// NOT_NEEDED) through the sidecar's own limiter: at most `perNode` driver calls at once, the rest
// waiting. A node's start writes its CSIAddonsNode as a sidecar does
// (desiredCSIAddonsNode, with the Pod that started it); its stop ends its server at once, as a
// killed pod does. What it does not do: the sidecar's reads on the heal path (PV, VolumeAttachment,
// Secret), which the cluster bench's real sidecars make. Run by cluster.ts through fork(); argv:
// <SimSpec as JSON>; talks over the IPC channel.
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { HealthCheckResponse_ServingStatus, HealthService } from "../../proto/gen/grpc/health/v1/health.js";
import { Capability_VolumeHealer_Type, IdentityService } from "../../proto/gen/identity/identity.js";
import { NodeHealVolumeResponse_Result, VolumeHealth_State } from "../../proto/gen/healer/v1/healer.js";
import { HealVolumeRequest_Mode, VolumeHealerService, type HealVolumeRequest } from "../../proto/gen/sidecar/v1/healer.js";
import { authMiddleware } from "../../sidecar/auth/authenticator.js";
import { parseConfig } from "../../sidecar/config/config.js";
import { createKubeApi } from "../../sidecar/kube/client.js";
import { kubeconfigEndpoint } from "../../sidecar/kube/kubeconfig.js";
import { KubeTransport } from "../../sidecar/kube/transport.js";
import type { CSIAddonsNode, KubeApi } from "../../sidecar/kube/api.js";
import { desiredCSIAddonsNode } from "../../sidecar/node/desired.js";
import { csiAddonsNodeName, podEndpoint } from "../../sidecar/node/name.js";
import { toStatus } from "../../sidecar/server/status.js";
import type { CallContext, Middleware } from "../../sidecar/server/context.js";
import { DomainError } from "../../sidecar/errors.js";
import { delay } from "../../common/util/delay.js";
import { Limiter } from "../../sidecar/relay/limiter.js";
import { DAEMONSET, DRIVER, NAMESPACE } from "../support/fixtures.js";
import { DAEMONSET_OWNER, type PodReplacement } from "./cluster-seed.js";
import { fleetNode } from "./fleet.js";

export interface SimSpec {
  kubeconfig: string;
  healMs: number;
  checkMs: number;
  perNode: number;
  /** The certificate every node serves (the controller verifies it, as it does the real sidecars'). */
  tls: { certFile: string; keyFile: string };
}

/** One call the simulated driver answered: wall-clock times in ms since the epoch. */
export interface SimCall {
  node: number;
  pv: string;
  mode: "ALWAYS" | "IF_ABNORMAL";
  t0: number;
  t1: number;
}

export type ToSim = { id: number; type: "start"; pods: PodReplacement[] } | { id: number; type: "stop"; nodes: number[] } | { id: number; type: "calls" | "reset" | "healed" };
export type FromSim =
  | { type: "ready" }
  /** Per node started: when its CSIAddonsNode was written (the new sidecar is back). */
  | { type: "start"; id: number; started: Record<number, { at: number }> }
  | { type: "stop"; id: number }
  /** The calls answered, and how many were refused (UNAUTHENTICATED, PERMISSION_DENIED) since the reset. */
  | { type: "calls"; id: number; calls: SimCall[]; refused: number }
  /** Volumes healed ALWAYS since the reset: cheap to ask every second, unlike every call. */
  | { type: "healed"; id: number; volumes: number }
  | { type: "reset"; id: number };

const spec = JSON.parse(process.argv[2]!) as SimSpec;
const parsed = parseConfig(["--node-id=sim", "--pod=sim", "--namespace=csi", "--csi-addons-address=unix:///sim.sock"], {});
if (parsed.kind !== "config") throw new Error("the sidecar's default flags did not parse");
const defaults = parsed.config;
const serverCredentials = grpc.ServerCredentials.createSsl(null, [{ cert_chain: readFileSync(spec.tls.certFile), private_key: readFileSync(spec.tls.keyFile) }]);
const kube: KubeApi = createKubeApi(new KubeTransport(await kubeconfigEndpoint(spec.kubeconfig)));

let calls: SimCall[] = [];
let refused = 0;
const healed = new Set<string>();

const servers = new Map<number, grpc.Server>();
/** Each node's port, kept across its pods: the endpoint a new pod's CSIAddonsNode names. */
const ports = new Map<number, number>();

function handlers(n: number) {
  // A new pod's sidecar starts with nothing cached: its auth decisions are asked again.
  const auth: Middleware = authMiddleware({
    kube,
    audiences: [`csi-addons-healer/${fleetNode(n)}`],
    namespace: NAMESPACE,
    rule: defaults.authz,
    cacheTtlMs: defaults.authCacheTtlMs,
  });
  // The sidecar's own limiter: at most perNode driver calls at once, the rest wait in arrival order.
  const slots = new Limiter(spec.perNode, Number.MAX_SAFE_INTEGER);
  const unary =
    <Req, Res>(method: string, fn: (req: Req, signal: AbortSignal) => Promise<Res>, withAuth: boolean) =>
    (call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>) => {
      const ac = new AbortController();
      call.on("cancelled", () => ac.abort());
      const ctx = { method, metadata: call.metadata, peer: call.getPeer(), deadline: Infinity, signal: ac.signal, fields: {} } as unknown as CallContext;
      const run = withAuth ? auth(call.request, ctx, (req: Req) => fn(req, ac.signal)) : fn(call.request, ac.signal);
      run.then(
        (res) => cb(null, res),
        (err: unknown) => {
          const s = toStatus(err);
          if (s.code === grpc.status.UNAUTHENTICATED || s.code === grpc.status.PERMISSION_DENIED) refused++;
          cb({ code: s.code, details: s.details });
        },
      );
    };
  const heal = async (req: HealVolumeRequest, signal: AbortSignal) =>
    slots.run(async () => {
      const mode = req.mode === HealVolumeRequest_Mode.ALWAYS ? "ALWAYS" : "IF_ABNORMAL";
      const t0 = Date.now();
      await delay(mode === "ALWAYS" ? spec.healMs : spec.checkMs, signal);
      if (signal.aborted) throw new DomainError("Cancelled", "cancelled");
      calls.push({ node: n, pv: req.pvName, mode, t0, t1: Date.now() });
      if (mode === "ALWAYS") healed.add(req.pvName);
      return {
        result: mode === "ALWAYS" ? NodeHealVolumeResponse_Result.HEALED : NodeHealVolumeResponse_Result.NOT_NEEDED,
        health: { state: VolumeHealth_State.HEALTHY, message: "" },
        message: "",
        volumeId: "",
      };
    }, signal);
  return {
    health: {
      check: unary("/grpc.health.v1.Health/Check", async () => ({ status: HealthCheckResponse_ServingStatus.SERVING }), false),
      watch: (call: grpc.ServerWritableStream<unknown, unknown>) => call.destroy(new Error("not served")),
    },
    identity: {
      getIdentity: unary("/identity.Identity/GetIdentity", async () => ({ name: DRIVER, vendorVersion: "sim", manifest: {} }), true),
      getCapabilities: unary(
        "/identity.Identity/GetCapabilities",
        async () => ({
          capabilities: [Capability_VolumeHealer_Type.HEAL_VOLUME, Capability_VolumeHealer_Type.GET_VOLUME_HEALTH].map((type) => ({
            type: { $case: "volumeHealer" as const, volumeHealer: { type } },
          })),
        }),
        true,
      ),
      probe: unary("/identity.Identity/Probe", async () => ({ ready: true }), true),
    },
    healer: {
      healVolume: unary("/sidecar.v1.VolumeHealer/HealVolume", heal, true),
    },
  };
}

async function startNode(p: PodReplacement): Promise<void> {
  const server = new grpc.Server();
  const h = handlers(p.node);
  server.addService(HealthService, h.health as unknown as grpc.UntypedServiceImplementation);
  server.addService(IdentityService, h.identity as unknown as grpc.UntypedServiceImplementation);
  server.addService(VolumeHealerService, h.healer as unknown as grpc.UntypedServiceImplementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${ports.get(p.node) ?? 0}`, serverCredentials, (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  ports.set(p.node, port);
  servers.set(p.node, server);
  await register(p, port);
}

/** The CSIAddonsNode as the node's new sidecar writes it: replaced when it exists, created when not. */
async function register(p: PodReplacement, port: number): Promise<void> {
  const name = csiAddonsNodeName(fleetNode(p.node), NAMESPACE, "DaemonSet", DAEMONSET);
  for (let attempt = 0; ; attempt++) {
    const signal = AbortSignal.timeout(10_000);
    const existing = await kube.getCSIAddonsNode(NAMESPACE, name, signal);
    const wanted = desiredCSIAddonsNode(
      {
        name,
        namespace: NAMESPACE,
        driverName: DRIVER,
        endpoint: podEndpoint(p.pod, NAMESPACE, port),
        nodeId: fleetNode(p.node),
        owner: { kind: "DaemonSet", name: DAEMONSET, ownerReference: DAEMONSET_OWNER, podUid: p.uid },
        podUid: p.uid,
        own: {},
        carried: {},
      },
      existing,
    );
    try {
      await (existing ? kube.replaceCSIAddonsNode(wanted, signal) : kube.createCSIAddonsNode(wanted as CSIAddonsNode, signal));
      return;
    } catch (err) {
      // Another writer (the controller's handled marker) in between: read again, as the sidecar does.
      if (attempt < 5 && (err as { status?: number }).status === 409) continue;
      throw err;
    }
  }
}

async function stopNode(n: number): Promise<void> {
  const s = servers.get(n);
  servers.delete(n);
  s?.forceShutdown();
}

const send = (m: FromSim) => process.send!(m);
process.on("disconnect", () => process.exit(0));
process.on("message", (m: ToSim) => {
  const reply = async (): Promise<FromSim> => {
    switch (m.type) {
      case "start": {
        const started: Record<number, { at: number }> = {};
        // A few at once: a wave's pods come up over a few seconds, not in one instant.
        for (let i = 0; i < m.pods.length; i += 16) {
          await Promise.all(m.pods.slice(i, i + 16).map(async (p) => (await startNode(p), (started[p.node] = { at: Date.now() }))));
        }
        return { type: "start", id: m.id, started };
      }
      case "stop":
        await Promise.all(m.nodes.map(stopNode));
        return { type: "stop", id: m.id };
      case "calls":
        return { type: "calls", id: m.id, calls, refused };
      case "healed":
        return { type: "healed", id: m.id, volumes: healed.size };
      case "reset":
        calls = [];
        refused = 0;
        healed.clear();
        return { type: "reset", id: m.id };
    }
  };
  reply().then(send, (err: unknown) => {
    console.error(`cluster-sim: ${m.type} failed: ${err instanceof Error ? err.stack : String(err)}`);
    process.exit(1);
  });
});
send({ type: "ready" });

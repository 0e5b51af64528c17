// The cluster bench (`npm run bench -- --cluster`): a DaemonSet upgrade of the node plugin over a
// whole cluster, end to end. The in-memory API holds the cluster as a real one writes it
// (cluster-seed.ts); the compiled healer controller runs under deploy/'s V8 flags with per-node
// tokens (--service-account) and TLS to every sidecar; one light process (cluster-sim.ts) serves
// the sidecar's contract for most nodes, and a few nodes run the real thing: a driver-stub and the
// compiled sidecar, auth on. Once the controller has seen every node, the rollout replaces the
// node-plugin Pods a wave at a time (new names and uids, `waveFraction` of the nodes each,
// `waveGapMs` apart): a node's old sidecar (and, on the real nodes, its driver with every mount)
// dies, the new one registers, and the controller must heal every volume with ALWAYS. Measured
// from the simulated drivers' and the driver-stubs' call logs, the API's counters and /proc.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { VolumeSpec } from "../../driver-stub/state.js";
import { CONTROLLER_SA, CONTROLLER_USER, spawnController } from "../demo/controller-process.js";
import { spawnSidecar, type Cleanup } from "../demo/processes.js";
import { restartDriverStub, startDriverStub, type DriverStub } from "../support/driver-stub.js";
import { NAMESPACE } from "../support/fixtures.js";
import { makeTlsFiles, type TlsFiles } from "../support/secure-sidecar.js";
import type { PodReplacement } from "./cluster-seed.js";
import type { FromSim, SimCall, SimSpec, ToSim } from "./cluster-sim.js";
import { readDeployLimits } from "./deploy-limits.js";
import { fleetNode, fleetPod, fleetStubState, volumeCount, type Fleet } from "./fleet.js";
import { requestTotal, startKubeChild, type KubeChild } from "./kube.js";
import type { Counts } from "./kube-child.js";
import { maxOverlap, percentile } from "./load.js";
import { readCpuMs, sampleMemory } from "./memory.js";
import { SIDECAR_USER, allHealthy, healCalls, isHealPath, isRead, waitEventsWritten, waitHandled, type NodePlugin, type RestartEnv } from "./restart.js";
import { waitFor } from "../support/wait.js";
import { forkIpc } from "./ipc-child.js";

export const SIM_USER = "system:serviceaccount:csi:csi-plugin-simulated";
const HEAL_FAMILY = { verbs: ["call"], apiGroups: ["csiaddons.openshift.io"], resources: ["csiaddonsnodes/heal"], namespace: NAMESPACE };

export interface ClusterCase {
  fleet: Fleet;
  /** The simulated drivers' time for an ALWAYS heal (an rbd-nbd remap), and for an IF_ABNORMAL check of a healthy volume. */
  healMs: number;
  checkMs: number;
  perNodeConcurrency: number;
  waveFraction: number;
  waveGapMs: number;
  /** Nodes that run a real driver-stub and sidecar, spread over the waves. */
  realNodes: number;
}


export interface ClusterResult extends ClusterCase {
  volumes: number;
  waves: number;
  /** One node's volumes × heal time ÷ the per-node limit: its drivers' pace (the issue's figure; whole rounds take ceil(volumes ÷ limit) heals). */
  nodePaceMs: number;
  /** Rollout start to the last node back, and to the last volume HEALED; that last stretch over the pace. */
  rollout: { lastBackMs: number; lastHealedMs: number; afterLastBackMs: number; ratioToPace: number };
  /** Per node, its new sidecar back to its last volume HEALED; and to its first heal at the driver (the controller noticing, reaching the sidecar). */
  perNode: { p50Ms: number; p99Ms: number; maxMs: number; worstNode: string; realMaxMs: number; firstHealP50Ms: number; firstHealP99Ms: number };
  /** ALWAYS heals answered, of the volumes; how many volumes were healed more than once; calls the simulated sidecars refused (UNAUTHENTICATED, PERMISSION_DENIED). */
  heals: { always: number; volumes: number; repeated: number; peakInFlight: number; refused: number };
  /** Requests from the rollout's start until every restart was recorded handled and every Event written. */
  api: {
    byIdentity: Record<string, Record<string, number>>;
    writesPerVolume: number;
    readsPerVolume: number;
    /** Access reviews (TokenReview, SubjectAccessReview): create requests that store nothing. */
    reviewsPerVolume: number;
    realSidecarReadsPerVolume: number;
    /**
     * What the real sidecars read from their start until their node's last volume was healed, per
     * volume, and by request: a just-started sidecar's cost of a heal burst, its start-up included.
     * (Another real sidecar's periodic reads in that span count too: the figure errs high.)
     */
    realSidecarBurst: { readsPerVolume: number; healPathPerVolume: number; requests: Record<string, number> };
    eventsWritten: number;
    /** Lists that did not name one object, by resource (an informer's re-list reads everything). */
    listsNotByName: Record<string, number>;
  };
  controller: { peakRssBytes: number; cpuSeconds: number; nodeOptions: string; limit: string; limitBytes: number; request: string };
  cpuSeconds: { apiServer: number; simulatedSidecars: number };
}

const isWrite = (key: string) => /^(create|update|patch|delete|deletecollection) /.test(key) && !isReview(key);
const isReview = (key: string) => /^create (tokenreviews|subjectaccessreviews|selfsubjectaccessreviews)$/.test(key);

/** The real sidecars' requests since `before`, by request. */
function sidecarRequestsSince(before: Counts, now: Counts): Record<string, number> {
  const was = before.byUser[SIDECAR_USER] ?? {};
  return Object.fromEntries(Object.entries(now.byUser[SIDECAR_USER] ?? {}).flatMap(([k, n]) => (n - (was[k] ?? 0) > 0 ? [[k, n - (was[k] ?? 0)]] : [])));
}

/** The simulated sidecars' process. */
async function startSim(spec: SimSpec, cleanup: Cleanup) {
  const child = await forkIpc<ToSim, FromSim>("test/bench/cluster-sim.ts", spec, "the simulated sidecars' process");
  cleanup.add("simulated sidecars", () => child.stop());
  type Answer<T extends FromSim["type"]> = Extract<FromSim, { type: T }>;
  return {
    pid: child.pid,
    start: (pods: PodReplacement[]) => child.ask<Answer<"start">>({ type: "start", pods }),
    stop: (nodes: number[]) => child.ask({ type: "stop", nodes }),
    calls: () => child.ask<Answer<"calls">>({ type: "calls" }),
    healed: async () => (await child.ask<Answer<"healed">>({ type: "healed" })).volumes,
    reset: () => child.ask({ type: "reset" }),
  };
}

async function startReal(c: ClusterCase, n: number, pod: string, kube: KubeChild, tls: TlsFiles, env: RestartEnv, spec: VolumeSpec, old?: DriverStub): Promise<NodePlugin> {
  const dir = join(env.dir, fleetNode(n));
  mkdirSync(dir, { recursive: true });
  const state = fleetStubState(c.fleet, n, spec);
  const stub = old ? await restartDriverStub(old, { state }) : await startDriverStub({ dir, state, readyTimeoutMs: 60_000 });
  env.cleanup.add(`driver-stub of ${fleetNode(n)}`, () => stub.stop());
  const sidecar = await spawnSidecar({
    build: "compiled",
    driverSocket: stub.addonsSocket,
    kubeconfig: kube.kubeconfigs["sidecar"]!,
    logFile: join(dir, `sidecar-${pod}.log`),
    node: fleetNode(n),
    pod,
    args: ["--enable-auth=true", `--tls-cert-file=${tls.certFile}`, `--tls-key-file=${tls.keyFile}`],
  });
  env.cleanup.add(`sidecar of ${fleetNode(n)}`, () => sidecar.stop());
  await sidecar.waitReadyz(200, 60_000);
  return { n, stub, sidecar };
}

const spreadOver = (count: number, total: number) => Array.from({ length: count }, (_, i) => Math.min(total - 1, Math.floor(((i + 0.5) * total) / count)));

export async function clusterRollout(c: ClusterCase, env: RestartEnv): Promise<ClusterResult> {
  const { progress } = env;
  const nodes = c.fleet.nodes;
  const volumes = volumeCount(c.fleet);
  const real = new Set(spreadOver(c.realNodes, nodes));
  const simNodes = [...Array(nodes).keys()].filter((n) => !real.has(n));
  const tls = await makeTlsFiles(env.dir);

  progress(`  seeding the in-memory API: ${nodes} Nodes, ${volumes} PVs, PVCs and VolumeAttachments, ${nodes} node-plugin Pods ...`);
  const kube = await startKubeChild({
    seed: { cluster: c.fleet },
    identities: { controller: CONTROLLER_USER, sidecar: SIDECAR_USER, sim: SIM_USER },
    allow: [{ username: CONTROLLER_USER, rule: HEAL_FAMILY }],
  });
  env.cleanup.add("in-memory Kubernetes API (cluster)", () => kube.stop());
  const uids = new Map(((await kube.list("v1", "Pod")) as { metadata: { name: string; uid: string } }[]).map((p) => [p.metadata.name, p.metadata.uid]));

  const sim = await startSim({ kubeconfig: kube.kubeconfigs["sim"]!, healMs: c.healMs, checkMs: c.checkMs, perNode: c.perNodeConcurrency, tls }, env.cleanup);
  await sim.start(simNodes.map((n) => ({ node: n, pod: fleetPod(n), uid: uids.get(fleetPod(n))! })));
  progress(`  in-memory API pid ${kube.pid}; simulated sidecars of ${simNodes.length} nodes pid ${sim.pid}; real driver-stub and sidecar on ${[...real].map(fleetNode).join(", ")}`);
  const healthy: VolumeSpec = { state: "HEALTHY", delayMs: c.checkMs };
  const broken: VolumeSpec = { state: "ABNORMAL", reason: "TransportEndpointNotConnected", delayMs: c.healMs };
  const reals = new Map<number, NodePlugin>();
  for (const n of real) reals.set(n, await startReal(c, n, fleetPod(n), kube, tls, env, healthy));

  const limits = readDeployLimits("controller");
  const controller = await spawnController({
    build: "compiled",
    kubeconfig: kube.kubeconfigs["controller"]!,
    logFile: join(env.dir, "controller-cluster.log"),
    args: [
      "--sidecar-tls=true",
      `--sidecar-ca-file=${tls.certFile}`,
      "--sidecar-tls-server-name=localhost",
      `--service-account=${CONTROLLER_SA.namespace}/${CONTROLLER_SA.name}`,
      `--per-node-concurrency=${c.perNodeConcurrency}`,
      // The periodic pass would race the rollout's heals for the same volumes: far away here.
      "--check-interval=1h",
    ],
  });
  env.cleanup.add("healer controller (cluster)", () => controller.stop());
  progress(`  healer controller pid ${controller.pid} (${limits.nodeOptions}); waiting for its first pass over every node`);
  // Each look lists every CSIAddonsNode from the API server being measured: once a second.
  const markers = await waitHandled(kube, nodes, new Map(), controller, "the controller's first pass over every node", { timeoutMs: 600_000, intervalMs: 1000 });

  await kube.reset();
  await sim.reset();
  const pids = { controller: controller.pid, apiServer: kube.pid, sim: sim.pid };
  const cpu0 = { controller: readCpuMs(pids.controller), apiServer: readCpuMs(pids.apiServer), sim: readCpuMs(pids.sim) };
  const memory = sampleMemory(controller.pid, 50);
  const perWave = Math.max(1, Math.round(nodes * c.waveFraction));
  const waves = Math.ceil(nodes / perWave);
  const backAt = new Map<number, number>();
  const realSince = new Map<number, number>();
  const bursts: Promise<Record<string, number>>[] = [];
  const start = Date.now();
  progress(`  rollout: ${waves} waves of ${perWave} nodes, ${c.waveGapMs / 1000} s apart`);
  for (let w = 0; w < waves; w++) {
    const wait = start + w * c.waveGapMs - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const wave = [...Array(nodes).keys()].slice(w * perWave, (w + 1) * perWave);
    const simWave = wave.filter((n) => !real.has(n));
    const realWave = wave.filter((n) => real.has(n));
    await sim.stop(simWave);
    await Promise.all(realWave.map(async (n) => (await reals.get(n)!.sidecar.stop(0), await reals.get(n)!.stub.kill())));
    const pods = await kube.replacePods(wave);
    const started = await sim.start(pods.filter((p) => !real.has(p.node)));
    for (const [n, { at }] of Object.entries(started.started)) backAt.set(Number(n), at);
    await Promise.all(
      pods
        .filter((p) => real.has(p.node))
        .map(async (p) => {
          const before = await kube.countsByUser();
          realSince.set(p.node, Date.now());
          const r = await startReal(c, p.node, p.pod, kube, tls, env, broken, reals.get(p.node)!.stub);
          reals.set(p.node, r);
          backAt.set(p.node, Date.now());
          const healed = waitFor(`the volumes of ${fleetNode(p.node)} healed`, () => allHealthy([r]), { timeoutMs: 1_800_000, intervalMs: 100 });
          const burst = healed.then(async () => sidecarRequestsSince(before, await kube.countsByUser()));
          burst.catch(() => undefined); // awaited after the rollout; its failure is reported then
          bursts.push(burst);
        }),
    );
    progress(`  wave ${w + 1}/${waves}: ${wave.length} node-plugin pods replaced at +${((Date.now() - start) / 1000).toFixed(1)} s`);
  }

  const simVolumes = simNodes.length * c.fleet.volumesPerNode;
  await controller.waitWhileRunning(
    `all ${volumes} volumes healed`,
    async () => {
      const healedSim = await sim.healed();
      return healedSim >= simVolumes && allHealthy([...reals.values()]);
    },
    1_800_000,
    1000,
  );
  await waitHandled(kube, nodes, markers, controller, "the controller to record every restart as handled", { timeoutMs: 300_000, intervalMs: 1000 });
  await waitEventsWritten(controller, 600_000, 1000);
  const peak = memory.stop();
  const counts = await kube.countsByUser();
  const burst: Record<string, number> = {};
  for (const one of await Promise.all(bursts)) for (const [k, n] of Object.entries(one)) burst[k] = (burst[k] ?? 0) + n;
  const cpu = { controller: readCpuMs(pids.controller) - cpu0.controller, apiServer: readCpuMs(pids.apiServer) - cpu0.apiServer, sim: readCpuMs(pids.sim) - cpu0.sim };
  const { calls, refused } = await sim.calls();
  const realCalls = new Map([...reals].map(([n, r]) => [n, healCalls(r.stub, realSince.get(n)!)]));
  const result = measure(c, { start, backAt, calls, refused, realCalls, counts, burst, waves, peakRss: peak.peakRssBytes, cpu, limits });

  await controller.stop();
  for (const r of reals.values()) {
    await r.sidecar.stop();
    await r.stub.stop();
  }
  await kube.stop();
  return result;
}

interface Observed {
  start: number;
  backAt: Map<number, number>;
  calls: SimCall[];
  refused: number;
  realCalls: Map<number, { t0: number; t1: number }[]>;
  counts: Counts;
  /** The real sidecars' requests from each one's start to its node's volumes all healed, summed. */
  burst: Record<string, number>;
  waves: number;
  peakRss: number;
  cpu: { controller: number; apiServer: number; sim: number };
  limits: ReturnType<typeof readDeployLimits>;
}

function measure(c: ClusterCase, o: Observed): ClusterResult {
  const volumes = volumeCount(c.fleet);
  const always = o.calls.filter((x) => x.mode === "ALWAYS");
  const lastByNode = new Map<number, number>();
  const firstByNode = new Map<number, number>();
  for (const x of always) {
    lastByNode.set(x.node, Math.max(lastByNode.get(x.node) ?? 0, x.t1));
    firstByNode.set(x.node, Math.min(firstByNode.get(x.node) ?? Infinity, x.t0));
  }
  for (const [n, calls] of o.realCalls) {
    lastByNode.set(n, Math.max(...calls.map((x) => x.t1)));
    firstByNode.set(n, Math.min(...calls.map((x) => x.t0)));
  }
  const firsts = [...o.backAt].map(([n, back]) => (firstByNode.get(n) ?? Infinity) - back).sort((a, b) => a - b);
  const perNode = [...o.backAt].map(([n, back]) => ({ n, ms: (lastByNode.get(n) ?? Infinity) - back }));
  const sorted = perNode.map((p) => p.ms).sort((a, b) => a - b);
  const worst = perNode.reduce((a, b) => (b.ms > a.ms ? b : a));
  const lastBack = Math.max(...o.backAt.values());
  const lastHealed = Math.max(...lastByNode.values());
  const nodePaceMs = (c.fleet.volumesPerNode * c.healMs) / c.perNodeConcurrency;
  const byPv = new Map<string, number>();
  for (const x of always) byPv.set(x.pv, (byPv.get(x.pv) ?? 0) + 1);
  const allCounts = o.counts.total;
  const realVolumes = o.realCalls.size * c.fleet.volumesPerNode;
  const sidecarCounts = o.counts.byUser[SIDECAR_USER] ?? {};
  const listsNotByName = Object.fromEntries(Object.entries(o.counts.listsNotByName).filter(([, v]) => v > 0));
  return {
    ...c,
    volumes,
    waves: o.waves,
    nodePaceMs,
    rollout: { lastBackMs: lastBack - o.start, lastHealedMs: lastHealed - o.start, afterLastBackMs: lastHealed - lastBack, ratioToPace: (lastHealed - lastBack) / nodePaceMs },
    perNode: {
      p50Ms: percentile(sorted, 50),
      p99Ms: percentile(sorted, 99),
      maxMs: worst.ms,
      worstNode: fleetNode(worst.n),
      realMaxMs: Math.max(...perNode.filter((p) => o.realCalls.has(p.n)).map((p) => p.ms)),
      firstHealP50Ms: percentile(firsts, 50),
      firstHealP99Ms: percentile(firsts, 99),
    },
    heals: {
      always: always.length + [...o.realCalls.values()].reduce((n, x) => n + x.length, 0),
      volumes: byPv.size + realVolumes,
      repeated: [...byPv.values()].filter((k) => k > 1).length,
      peakInFlight: maxOverlap(always),
      refused: o.refused,
    },
    api: {
      byIdentity: o.counts.byUser,
      writesPerVolume: requestTotal(allCounts, isWrite) / volumes,
      readsPerVolume: requestTotal(allCounts, isRead) / volumes,
      reviewsPerVolume: requestTotal(allCounts, isReview) / volumes,
      realSidecarReadsPerVolume: requestTotal(sidecarCounts, isRead) / realVolumes,
      realSidecarBurst: {
        readsPerVolume: requestTotal(o.burst, isRead) / realVolumes,
        healPathPerVolume: requestTotal(o.burst, (k) => isRead(k) && isHealPath(k)) / realVolumes,
        requests: o.burst,
      },
      eventsWritten: allCounts["create events"] ?? 0,
      listsNotByName,
    },
    controller: {
      peakRssBytes: o.peakRss,
      cpuSeconds: o.cpu.controller / 1000,
      nodeOptions: o.limits.nodeOptions,
      limit: o.limits.limit,
      limitBytes: o.limits.limitBytes,
      request: o.limits.request ?? "",
    },
    cpuSeconds: { apiServer: o.cpu.apiServer / 1000, simulatedSidecars: o.cpu.sim / 1000 },
  };
}

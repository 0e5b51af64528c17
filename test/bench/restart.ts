// 4. The headline: time to heal after a node-plugin restart. A fleet of nodes (driver-stub and
// compiled sidecar per node, all on the bench's machine) and the compiled healer controller; every driver
// is killed and started again with all its mounts dead, and we measure from the moment the drivers
// are back to the last volume HEALED — against the floor: the same heals sent straight to the
// drivers with the controller's bounds (--per-node-concurrency per driver, --max-concurrent-heals
// in all), and beside it the same heals through a relay per driver that does nothing a sidecar
// must: a bare node:http2 relay (the floor plus one hop) and a grpc-js relay (the floor plus one hop
// through the decided stack's server and driver client). Kubernetes API requests are counted per
// identity: the controller and the sidecars run with tokens of their own ServiceAccounts.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { restartDriverStub, startDriverStub, type DriverStub } from "../support/driver-stub.js";
import { call } from "../support/grpc.js";
import { VolumeHealerNodeClient } from "../../proto/gen/healer/v1/healer.js";
import type { VolumeSpec } from "../../driver-stub/state.js";
import { CONTROLLER_USER, EVENTS_QUEUED_METRIC, HANDLED_RESTART, RESTART_METRIC, spawnController } from "../demo/controller-process.js";
import { metricSum } from "../demo/controller-view.js";
import type { LoggedProcess } from "../demo/logged-process.js";
import { spawnSidecar, type Cleanup, type SidecarProcess } from "../demo/processes.js";
import { fleetHealRequest, fleetNode, fleetPod, fleetStubState, fleetVolumes, volumeCount, type Fleet } from "./fleet.js";
import { requestTotal, startKubeChild, type KubeChild } from "./kube.js";
import type { Counts } from "./kube-child.js";
import { maxOverlap, percentile, runBounded } from "./load.js";
import { readCpuMs } from "./memory.js";
import { startRelay, type RelayKind } from "./relays.js";

export const SIDECAR_USER = "system:serviceaccount:csi:csi-plugin";
const CAN = "csiaddons.openshift.io/v1alpha1";
/** Processes started at once while setting up (not measured): more would only thrash 2 cores. */
const START_BATCH = 4;

export interface RestartCase {
  title: string;
  fleet: Fleet;
  healDelayMs: number;
  perNodeConcurrency: number;
  maxConcurrentHeals: number;
}

export interface RestartResult extends RestartCase {
  volumes: number;
  /** Every run of the case, when it was run more than once (this result is the median one). */
  runs?: { floorMs: number; bareFloorMs: number; grpcJsFloorMs: number; backToLastHealedMs: number }[];
  /** The same heals straight to the drivers, with the controller's bounds. */
  floor: { wallMs: number; peakDriverCalls: number; cpuMsPerHeal: { client: number; drivers: number } };
  /** The same heals through a bare node:http2 relay per driver, with the same bounds (relayFloorRun). */
  bareFloor: { wallMs: number };
  /** The same through a grpc-js relay per driver (grpc-js-relay.ts): the decided stack's hop. */
  grpcJsFloor: { wallMs: number };
  healer: {
    /** First driver back to last driver back (they restart at once, but start one by one on a busy machine). */
    driversBackSpreadMs: number;
    /** The headline: last driver back to last volume HEALED. */
    backToLastHealedMs: number;
    /** Stricter: first driver back to last volume HEALED. */
    firstBackToLastHealedMs: number;
    /** Last driver back to every sidecar SERVING again (its reconnect backoff is up to 1 s). */
    backToSidecarsServingMs: number;
    /** Last driver back to the first NodeHealVolume a driver received. */
    backToFirstHealMs: number;
    /** First NodeHealVolume received to last volume HEALED. */
    healPhaseMs: number;
    /** Per node, from its own driver back: to its first heal, and to its last volume HEALED (median and worst). */
    perNode: { backToFirstHealMedianMs: number; backToLastHealedMedianMs: number; backToLastHealedMaxMs: number };
    /** NodeHealVolume calls the drivers answered OK after the restart (exactly once per volume is right). */
    driverHealCalls: number;
    peakDriverCalls: number;
    /** The controller's own csi_addons_healer_restart_heal_duration_seconds: restarts seen, mean per node (from driverRestartedAt). */
    controllerMetric: { restarts: number; meanMs: number };
    /** CPU time per healed volume from the restart until it is recorded and its Events are written (the restarted drivers' own is left out: it includes their start-up). */
    cpuMsPerHeal: { controller: number; sidecars: number; apiServer: number };
  };
  /** Requests from the restart until the controller recorded every restart as handled and wrote its Events, by identity. */
  apiRequests: {
    controller: Record<string, number>;
    sidecars: Record<string, number>;
    controllerPerHeal: number;
    /** Without Events and the handled-marker patches: what informers should make about zero. */
    controllerReadsPerHeal: number;
    /** On the heal path (PVs, VolumeAttachments, Secrets, Nodes). */
    sidecarsPerHeal: number;
    /** The rest, per sidecar (not per heal): its own objects — recording the restart on the CSIAddonsNode, its Pod. */
    sidecarsPerRestart: number;
  };
}

export interface RestartEnv {
  dir: string;
  cleanup: Cleanup;
  progress: (line: string) => void;
}

const healthy = (c: RestartCase): VolumeSpec => ({ state: "HEALTHY", delayMs: c.healDelayMs });
const broken = (c: RestartCase): VolumeSpec => ({ state: "ABNORMAL", reason: "TransportEndpointNotConnected", delayMs: c.healDelayMs });
const sumCpu = (pids: number[]) => pids.reduce((n, pid) => n + readCpuMs(pid), 0);
export const median = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);
export const isRead = (key: string) => /^(get|list|watch) /.test(key);
/** What the sidecar reads to serve a heal (4.4); anything else is about its own objects. */
export const isHealPath = (key: string) => / (persistentvolumes|volumeattachments|csidrivers|secrets|nodes)$/.test(key);

/** fn over items, `size` at a time (set-up only). */
async function inBatches<T, R>(items: readonly T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

export interface NodePlugin {
  n: number;
  stub: DriverStub;
  sidecar: SidecarProcess;
}

async function startNodePlugins(c: RestartCase, kube: KubeChild, env: RestartEnv): Promise<NodePlugin[]> {
  const nodes = Array.from({ length: c.fleet.nodes }, (_, n) => n);
  return inBatches(nodes, START_BATCH, async (n) => {
    const dir = join(env.dir, fleetNode(n));
    mkdirSync(dir, { recursive: true });
    const stub = await startDriverStub({ dir, state: fleetStubState(c.fleet, n, healthy(c)), readyTimeoutMs: 60_000 });
    env.cleanup.add(`driver-stub of ${fleetNode(n)}`, () => stub.stop());
    const sidecar = await spawnSidecar({
      build: "compiled",
      driverSocket: stub.addonsSocket,
      kubeconfig: kube.kubeconfigs["sidecar"]!,
      logFile: join(dir, "sidecar.log"),
      node: fleetNode(n),
      pod: fleetPod(n),
    });
    env.cleanup.add(`sidecar of ${fleetNode(n)}`, () => sidecar.stop());
    await sidecar.waitReadyz(200, 60_000);
    return { n, stub, sidecar };
  });
}

export const allHealthy = (plugins: readonly Pick<NodePlugin, "stub">[]) =>
  plugins.every(({ stub }) => Object.values(stub.readState().volumes ?? {}).every((v) => v.state === "HEALTHY"));

/** The floor: every volume broken, healed straight at the drivers with the controller's bounds. */
async function floorRun(c: RestartCase, plugins: NodePlugin[]): Promise<RestartResult["floor"]> {
  for (const { n, stub } of plugins) stub.setState(fleetStubState(c.fleet, n, broken(c)));
  const clients = plugins.map(({ stub }) => new VolumeHealerNodeClient(`unix://${stub.addonsSocket}`, grpc.credentials.createInsecure()));
  try {
    const since = Date.now();
    const cpu0 = { client: process.cpuUsage(), drivers: sumCpu(plugins.map((p) => p.stub.proc.child.pid!)) };
    const { wallMs } = await healAll(c, clients);
    const client = process.cpuUsage(cpu0.client);
    const drivers = sumCpu(plugins.map((p) => p.stub.proc.child.pid!)) - cpu0.drivers;
    if (!allHealthy(plugins)) throw new Error("direct heals: not every volume is HEALTHY afterwards");
    const peak = Math.max(...plugins.map(({ stub }) => maxOverlap(healCalls(stub, since))));
    const volumes = volumeCount(c.fleet);
    return { wallMs, peakDriverCalls: peak, cpuMsPerHeal: { client: (client.user + client.system) / 1000 / volumes, drivers: drivers / volumes } };
  } finally {
    for (const client of clients) client.close();
  }
}

/** Every volume of the fleet healed through `clients` (one per node) with the controller's bounds. */
function healAll(c: RestartCase, clients: VolumeHealerNodeClient[]): Promise<{ wallMs: number }> {
  return runBounded(fleetVolumes(c.fleet), (v) => String(v.node), { perKey: c.perNodeConcurrency, total: c.maxConcurrentHeals }, (v) =>
    call(clients[v.node]!, clients[v.node]!.nodeHealVolume, fleetHealRequest(v.node, v.j)),
  );
}

/**
 * The same heals through a relay per driver that does nothing a sidecar does: bare-relay.ts (the
 * floor plus the one hop every relay adds) or grpc-js-relay.ts (that hop through the decided stack's
 * server and driver client). What is left between it and the healer is the sidecar's and the
 * controller's own work (the VolumeAttachment read among it) and noticing the restart.
 */
async function relayFloorRun(kind: RelayKind, c: RestartCase, plugins: NodePlugin[], env: RestartEnv): Promise<{ wallMs: number }> {
  for (const { n, stub } of plugins) stub.setState(fleetStubState(c.fleet, n, broken(c)));
  const relays = await inBatches(plugins, START_BATCH, async ({ n, stub }) => {
    const relay = await startRelay(kind, stub.addonsSocket);
    // Stopped below; registered too, so that one failing to start leaves none of the others running.
    env.cleanup.add(`${kind} relay of ${fleetNode(n)}`, () => relay.stop());
    return relay;
  });
  env.progress(`  ${kind} relay pids ${relays.map((r) => `pid ${r.pid}`).join(", ")}`);
  const clients = relays.map((r) => new VolumeHealerNodeClient(r.address, grpc.credentials.createInsecure()));
  try {
    const result = await healAll(c, clients);
    if (!allHealthy(plugins)) throw new Error(`heals through the ${kind} relays: not every volume is HEALTHY afterwards`);
    return result;
  } finally {
    for (const client of clients) client.close();
    await Promise.all(relays.map((r) => r.stop()));
  }
}

export function healCalls(stub: DriverStub, since: number) {
  return stub.calls({ method: "NodeHealVolume" }).filter((e) => e.t0 >= since && e.code === "OK");
}

/** The controller's handled-restart marker on each CSIAddonsNode, by name. */
export async function handledMarkers(kube: KubeChild): Promise<Map<string, string | undefined>> {
  const nodes = (await kube.list(CAN, "CSIAddonsNode")) as { metadata: { name: string; annotations?: Record<string, string> } }[];
  return new Map(nodes.map((o) => [o.metadata.name, o.metadata.annotations?.[HANDLED_RESTART]]));
}

/** Waits until the controller has recorded a (new) handled marker on every node's CSIAddonsNode; resolves with the markers. */
export async function waitHandled(
  kube: KubeChild,
  nodes: number,
  before: Map<string, string | undefined>,
  controller: LoggedProcess,
  what: string,
  timing: { timeoutMs: number; intervalMs?: number } = { timeoutMs: 120_000 },
): Promise<Map<string, string | undefined>> {
  return controller.waitWhileRunning(
    what,
    async () => {
      const now = await handledMarkers(kube);
      const done = [...now].filter(([name, v]) => v !== undefined && v !== before.get(name));
      return done.length >= nodes && now;
    },
    timing.timeoutMs,
    timing.intervalMs,
  );
}

/** Waits until the controller's Event backlog is written: its CPU and requests are counted after that. */
export function waitEventsWritten(controller: LoggedProcess, timeoutMs: number, intervalMs?: number): Promise<unknown> {
  return controller.waitWhileRunning("the controller's Event backlog written", async () => metricSum(await controller.metrics(), EVENTS_QUEUED_METRIC) === 0, timeoutMs, intervalMs);
}

interface Observed {
  floor: RestartResult["floor"];
  bareFloor: RestartResult["bareFloor"];
  grpcJsFloor: RestartResult["grpcJsFloor"];
  plugins: NodePlugin[];
  /** When each node's new driver process was ready. */
  backAt: number[];
  killedAt: number;
  counts: Counts;
  /** The controller's /metrics text after the restart heal. */
  metrics: string;
  /** CPU time used from the restart until it was recorded as handled. */
  cpuMs: { controller: number; sidecars: number; apiServer: number };
}

/** The result from what the drivers' call logs, the sidecars' logs, the API's counters and the controller's metrics say. */
function measure(c: RestartCase, o: Observed): RestartResult {
  const volumes = volumeCount(c.fleet);
  const callsByNode = o.plugins.map(({ stub }) => healCalls(stub, o.killedAt));
  const perNode = callsByNode.map((mine, i) => ({
    first: Math.min(...mine.map((e) => e.t0)) - o.backAt[i]!,
    last: Math.max(...mine.map((e) => e.t1)) - o.backAt[i]!,
  }));
  const heals = callsByNode.flat();
  const lastHealed = Math.max(...heals.map((e) => e.t1));
  const firstHeal = Math.min(...heals.map((e) => e.t0));
  const lastBack = Math.max(...o.backAt);
  const servingAt = o.plugins.map(({ sidecar }) =>
    Math.min(...sidecar.logLines().filter((l) => l.message === "ready: SERVING").map((l) => Date.parse(l.timestamp)).filter((t) => t >= o.killedAt)),
  );
  const restarts = metricSum(o.metrics, `${RESTART_METRIC}_count`);
  const controllerCounts = o.counts.byUser[CONTROLLER_USER] ?? {};
  const sidecarCounts = o.counts.byUser[SIDECAR_USER] ?? {};
  return {
    ...c,
    volumes,
    floor: o.floor,
    bareFloor: o.bareFloor,
    grpcJsFloor: o.grpcJsFloor,
    healer: {
      driversBackSpreadMs: lastBack - Math.min(...o.backAt),
      backToLastHealedMs: lastHealed - lastBack,
      firstBackToLastHealedMs: lastHealed - Math.min(...o.backAt),
      backToSidecarsServingMs: Math.max(...servingAt) - lastBack,
      backToFirstHealMs: firstHeal - lastBack,
      healPhaseMs: lastHealed - firstHeal,
      perNode: {
        backToFirstHealMedianMs: median(perNode.map((p) => p.first)),
        backToLastHealedMedianMs: median(perNode.map((p) => p.last)),
        backToLastHealedMaxMs: Math.max(...perNode.map((p) => p.last)),
      },
      driverHealCalls: heals.length,
      peakDriverCalls: Math.max(...callsByNode.map(maxOverlap)),
      controllerMetric: { restarts, meanMs: (metricSum(o.metrics, `${RESTART_METRIC}_sum`) / restarts) * 1000 },
      cpuMsPerHeal: { controller: o.cpuMs.controller / volumes, sidecars: o.cpuMs.sidecars / volumes, apiServer: o.cpuMs.apiServer / volumes },
    },
    apiRequests: {
      controller: controllerCounts,
      sidecars: sidecarCounts,
      controllerPerHeal: requestTotal(controllerCounts) / volumes,
      controllerReadsPerHeal: requestTotal(controllerCounts, isRead) / volumes,
      sidecarsPerHeal: requestTotal(sidecarCounts, isHealPath) / volumes,
      sidecarsPerRestart: requestTotal(sidecarCounts, (k) => !isHealPath(k)) / c.fleet.nodes,
    },
  };
}

export async function restartHeal(c: RestartCase, env: RestartEnv): Promise<RestartResult> {
  const { progress } = env;
  const volumes = volumeCount(c.fleet);
  const kube = await startKubeChild({ seed: { fleet: c.fleet }, identities: { sidecar: SIDECAR_USER, controller: CONTROLLER_USER } });
  env.cleanup.add("in-memory Kubernetes API", () => kube.stop());
  progress(`  in-memory Kubernetes API pid ${kube.pid}; starting ${c.fleet.nodes} driver-stubs and sidecars (compiled) ...`);
  let plugins = await startNodePlugins(c, kube, env);
  progress(`  driver-stub pids ${plugins.map((p) => `pid ${p.stub.proc.child.pid}`).join(", ")}`);
  progress(`  sidecar pids ${plugins.map((p) => `pid ${p.sidecar.pid}`).join(", ")}`);

  progress(`  floor: ${volumes} heals straight to the driver(s), ${c.perNodeConcurrency} per driver, ${c.maxConcurrentHeals} in all`);
  const floor = await floorRun(c, plugins);
  progress(`  floor: ${floor.wallMs.toFixed(0)} ms, at most ${floor.peakDriverCalls} heals at once at one driver`);
  const bareFloor = await relayFloorRun("bare", c, plugins, env);
  progress(`  the same heals through a bare node:http2 relay per driver: ${bareFloor.wallMs.toFixed(0)} ms`);
  const grpcJsFloor = await relayFloorRun("grpcJs", c, plugins, env);
  progress(`  the same heals through a grpc-js relay per driver: ${grpcJsFloor.wallMs.toFixed(0)} ms`);

  const controller = await spawnController({
    build: "compiled",
    kubeconfig: kube.kubeconfigs["controller"]!,
    logFile: join(env.dir, "controller.log"),
    // The periodic pass would race the restart heal for the same volumes: far away here.
    args: [`--per-node-concurrency=${c.perNodeConcurrency}`, `--max-concurrent-heals=${c.maxConcurrentHeals}`, "--check-interval=1h"],
  });
  env.cleanup.add("healer controller", () => controller.stop());
  progress(`  healer controller pid ${controller.pid}, log ${controller.logFile}; waiting for its first pass over every node`);
  const firstSight = await waitHandled(kube, c.fleet.nodes, new Map(), controller, "the controller's first pass over every node");

  progress(`  restart: every driver killed (SIGKILL) and started again with all ${volumes} mounts dead`);
  await kube.reset();
  const cpuPids = { controller: [controller.pid], sidecars: plugins.map((p) => p.sidecar.pid), apiServer: [kube.pid] };
  const cpuBefore = Object.fromEntries(Object.entries(cpuPids).map(([k, pids]) => [k, sumCpu(pids)]));
  const killedAt = Date.now();
  await Promise.all(plugins.map(({ stub }) => stub.kill()));
  const restarted = await Promise.all(plugins.map(({ n, stub }) => restartDriverStub(stub, { state: fleetStubState(c.fleet, n, broken(c)) })));
  plugins = plugins.map((p, i) => ({ ...p, stub: restarted[i]! }));
  for (const p of plugins) env.cleanup.add(`restarted driver-stub of ${fleetNode(p.n)}`, () => p.stub.stop());
  const backAt = plugins.map(({ stub }) => stub.readyAt);
  progress(`  restarted driver-stub pids ${plugins.map((p) => `pid ${p.stub.proc.child.pid}`).join(", ")}`);
  // The heal phase is timed from the drivers' call logs; this poll only finds its end. Each look
  // parses every driver's state file (60 KB, ~0.4 ms, for 500 volumes): every 25 ms that is CPU the
  // processes under measurement would lose to the bench, as they do not in the floor's run.
  await controller.waitWhileRunning(`all ${volumes} volumes HEALTHY again`, () => allHealthy(plugins), 180_000, 250);
  await waitHandled(kube, c.fleet.nodes, firstSight, controller, "the controller to record every restart as handled");
  // The controller writes its Events one at a time, after the heals they report: CPU and requests
  // are counted once they are all written, so the per-heal costs include them.
  await waitEventsWritten(controller, 180_000);
  const counts = await kube.countsByUser();
  const cpuMs = Object.fromEntries(Object.entries(cpuPids).map(([k, pids]) => [k, sumCpu(pids) - cpuBefore[k]!])) as Observed["cpuMs"];
  const result = measure(c, { floor, bareFloor, grpcJsFloor, plugins, backAt, killedAt, counts, cpuMs, metrics: await controller.metrics() });
  progress(`  ${volumes} volumes HEALED ${result.healer.backToLastHealedMs.toFixed(0)} ms after the driver(s) were back (floor ${floor.wallMs.toFixed(0)} ms)`);

  // Stop this case's processes now: the next case needs the CPU.
  await controller.stop();
  await Promise.all(plugins.map(async ({ stub, sidecar }) => (await sidecar.stop(), await stub.stop())));
  await kube.stop();
  return result;
}

/** The run whose ratio (drivers back -> last HEALED, over the floor) is the median, with every run's beside it. */
export function medianRun(runs: RestartResult[]): RestartResult {
  const ratio = (r: RestartResult) => r.healer.backToLastHealedMs / r.floor.wallMs;
  const sorted = [...runs].sort((a, b) => ratio(a) - ratio(b));
  const median = sorted[Math.floor((sorted.length - 1) / 2)]!;
  return runs.length === 1 ? median : { ...median, runs: runs.map((r) => ({ floorMs: r.floor.wallMs, bareFloorMs: r.bareFloor.wallMs, grpcJsFloorMs: r.grpcJsFloor.wallMs, backToLastHealedMs: r.healer.backToLastHealedMs })) };
}

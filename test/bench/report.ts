// The bench's results: their JSON shape (bench/results.json, so runs can be compared) and the
// tables printed from them.
import { formatTable } from "../demo/table.js";
import type { LoadResult } from "./load.js";
import type { OverloadResult } from "./overload.js";
import { mib } from "./memory.js";
import { renderRestart, type RestartResults } from "./report-restart.js";
import type { SoakResults } from "./soak.js";
import type { RepeatedCheckCost } from "./repeated.js";
import type { QueueScale } from "./queue-scale.js";
import type { ControllerScale } from "./controller-scale.js";
import type { ClusterResults } from "./report-cluster.js";

export interface Startup {
  /** Our spawn() to the sidecar's "ready: SERVING" log line. */
  processStartToServingMs: number;
  /** Our spawn() to its first log line: node's own start and loading the code. */
  processStartToFirstLogMs: number;
  /** Its "driver ready" log line (identity, capabilities, Probe done) to "ready: SERVING". */
  driverReadyToServingMs: number;
}

export interface Results {
  timestamp: string;
  mode: "full" | "quick";
  node: string;
  machine: { platform: string; arch: string; kernel: string; cpuModel: string; cpus: number; totalMemoryBytes: number; loadAverage1m: number; loadAverage1mAtStart: number; workDir?: string };
  git: { commit: string; dirty: boolean } | undefined;
  sidecar: { entry: string; build: string };
  relay: {
    concurrency: number;
    /** The paths took turns this many times; each path's rounds are pooled. */
    rounds: number;
    direct: LoadResult;
    sidecar: LoadResult;
    /** The same driver calls through bare-relay.ts: one Node hop, nothing else. */
    bare: LoadResult;
    /** The same driver calls through grpc-js-relay.ts: one hop through grpc-js's server and our driver client, messages as bytes. */
    grpcJs: LoadResult;
    /** CPU time of the relay process per call (user + system). */
    cpuUsPerCall: { sidecar: number; bare: number; grpcJs: number };
  }[];
  burst: {
    volumes: number;
    healDelayMs: number;
    maxInflight: number;
    maxQueue: number;
    idealMs: number;
    /** The driver alone at maxInflight calls at once. */
    direct: { wallMs: number; peakDriverCalls: number };
    /** All volumes at once through the sidecar. */
    sidecar: { wallMs: number; peakDriverCalls: number; outcomes: Record<string, number> };
    /** The same burst again through the same, now warm sidecar (its PVs cached). */
    again: { wallMs: number; apiRequestsPerHeal: number };
    /** The same burst through a fresh grpc-js-relay.ts with the same --max-inflight: its wall time and peak RSS. */
    grpcJs: { wallMs: number; peakRssBytes: number; peakDriverCalls: number };
    /** Requests the in-memory API served during the burst, by "verb resource". */
    apiRequests: Record<string, number>;
    apiRequestsPerHeal: number;
  };
  memory: {
    idleRssBytes: number;
    peakRssBytes: number;
    hwmBytes: number;
    samples: number;
    /** bare-relay.ts connected to the driver after one call: Node with http2 and TLS loaded, under the sidecar's V8 flags. */
    bareRelayIdleRssBytes: number;
    /** grpc-js-relay.ts the same way: the decided stack (grpc-js, winston, prom-client) loaded, relaying bytes. */
    grpcJsRelayIdleRssBytes: number;
  };
  startup: {
    relaySidecar: Startup;
    burstSidecar: Startup;
    /** Sidecars started one after the other on the idle stack: the medians and every start. */
    repeated: { starts: number; median: Startup; all: Startup[] };
  };
  /** The headline: time to heal after a node-plugin restart, through the healer controller. */
  restartHeal: RestartResults;
  /** The controller's work queue with a first pass over a large cluster queued at once (queue-scale.ts). */
  controllerQueue: QueueScale;
  /** The controller's memory with a large cluster in its informers (controller-scale.ts). */
  controllerScale: ControllerScale;
  /** Under deploy/'s NODE_OPTIONS. */
  overload: OverloadResult;
  /** The same, the sidecar started as the image starts it with no NODE_OPTIONS (nodeOptions ""). */
  overloadImage: OverloadResult;
  /** API requests per GetVolumeHealth of a volume already checked (see repeated.ts). */
  apiRequestsPerRepeatedCheck: number;
  repeatedCheck: RepeatedCheckCost;
  /** Driver back → SERVING, the worst of the soak's restarts (null: no restart measured). */
  reconnectMs: number | null;
  soak: SoakResults;
  /** Section 6 (report-cluster.ts). */
  cluster: ClusterResults;
}

export const ms = (v: number) => `${v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)} ms`;
const perS = (v: number) => `${Math.round(v).toLocaleString("en-US")}/s`;
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
const us = (v: number) => `${Math.round(v)} us`;
const MiB = (bytes: number) => `${mib(bytes).toFixed(1)} MiB`;

function renderQueueScale(q: QueueScale): string {
  const n = (q.nodes * q.volumesPerNode).toLocaleString("en-US");
  return (
    `   the controller's work queue at cluster scale: ${n} checks queued at once (${q.nodes} nodes x ${q.volumesPerNode} volumes, a node per turn of the event loop, ` +
    `${q.bounds.perNode} per node, ${q.bounds.global} in all), each answered in the turn after it started: all ran in ${ms(q.wallMs)}, the event loop held at most ${ms(q.maxStallMs)}`
  );
}

function renderControllerScale(c: ControllerScale): string {
  const volumes = (c.nodes * c.volumesPerNode).toLocaleString("en-US");
  return (
    `   the controller's informers at cluster scale: ${c.nodes} Nodes, ${volumes} PVs and ${volumes} VolumeAttachments as a cluster writes them, NODE_OPTIONS="${c.nodeOptions}": ` +
    `listed in ${ms(c.syncMs)}; RSS ${MiB(c.rssBytes)} after, ${MiB(c.hwmBytes)} at the peak (${((c.hwmBytes / c.limitBytes) * 100).toFixed(0)}% of deploy/'s ${c.limit}); V8 heap in use ${MiB(c.heapUsedBytes)}`
  );
}

export function renderTables(r: Results): string {
  const relayRows = r.relay.flatMap(({ concurrency: c, direct: d, sidecar, bare, grpcJs, cpuUsPerCall: cpu }) => {
    /** The direct value, then each relay's value and its ratio to the direct one. */
    const cells = (value: (l: LoadResult) => number, show: (v: number) => string) => [
      show(value(d)),
      ...[sidecar, bare, grpcJs].flatMap((l) => [show(value(l)), ratio(value(l), value(d))]),
    ];
    return [
      [`${c} at once`, "p50 latency", ...cells((l) => l.p50Ms, ms)],
      [`${c} at once`, "p99 latency", ...cells((l) => l.p99Ms, ms)],
      [`${c} at once`, "throughput", ...cells((l) => l.throughputPerS, perS)],
      [`${c} at once`, "relay's CPU per call", "-", ...[cpu.sidecar, cpu.bare, cpu.grpcJs].flatMap((v) => [us(v), "-"])],
    ];
  });
  const b = r.burst;
  const perHeal = Object.entries(b.apiRequests).map(([k, n]) => `${k} ${n}`).join(", ") || "none";
  const burstRows = [
    ["wall time", ms(b.direct.wallMs), ms(b.sidecar.wallMs), ratio(b.sidecar.wallMs, b.direct.wallMs)],
    [`ideal ${b.volumes} x ${b.healDelayMs} ms / ${b.maxInflight}`, ms(b.idealMs), ms(b.idealMs), "-"],
    ["wall time / ideal", ratio(b.direct.wallMs, b.idealMs), ratio(b.sidecar.wallMs, b.idealMs), "-"],
    ["most driver calls at once", String(b.direct.peakDriverCalls), String(b.sidecar.peakDriverCalls), "-"],
    ["Kubernetes API requests per heal", "-", b.apiRequestsPerHeal.toFixed(2), "-"],
    ["again, the same sidecar warm: wall time", ms(b.direct.wallMs), ms(b.again.wallMs), ratio(b.again.wallMs, b.direct.wallMs)],
    ["again: Kubernetes API requests per heal", "-", b.again.apiRequestsPerHeal.toFixed(2), "-"],
    ["the same burst through a fresh grpc-js relay: wall time", ms(b.direct.wallMs), ms(b.grpcJs.wallMs), ratio(b.grpcJs.wallMs, b.direct.wallMs)],
  ];
  const st = r.startup.repeated;
  const range = (key: keyof Startup) => `${ms(st.median[key])} (${ms(Math.min(...st.all.map((x) => x[key])))} - ${ms(Math.max(...st.all.map((x) => x[key])))})`;
  const sidecarRows = [
    ["idle RSS (ready, no calls yet)", MiB(r.memory.idleRssBytes)],
    ["  beside it: the bare node:http2 relay, idle (http2 and TLS loaded, one call made)", MiB(r.memory.bareRelayIdleRssBytes)],
    ["  and the grpc-js relay, idle (grpc-js, winston, prom-client loaded, one call made)", MiB(r.memory.grpcJsRelayIdleRssBytes)],
    [`peak RSS during the burst (${r.memory.samples} samples)`, MiB(r.memory.peakRssBytes)],
    ["  beside it: the grpc-js relay's peak RSS in the same burst", MiB(r.burst.grpcJs.peakRssBytes)],
    ["VmHWM (high-water mark since start)", MiB(r.memory.hwmBytes)],
    [`${st.starts} starts, median (lowest - highest):`, ""],
    ['  "driver ready" -> "ready: SERVING"', range("driverReadyToServingMs")],
    ["  process start -> first log line", range("processStartToFirstLogMs")],
    ["  process start -> SERVING", range("processStartToServingMs")],
    ["the burst's sidecar: process start -> SERVING", ms(r.startup.burstSidecar.processStartToServingMs)],
  ];
  const o = r.overload;
  const oi = r.overloadImage;
  const overloadColumn = (x: OverloadResult) => [
    `${x.calls.toLocaleString("en-US")}: ${Object.entries(x.outcomes).map(([k, n]) => `${n} ${k}`).join(", ")}`,
    `${MiB(x.peakRssBytes)} (${x.samples} samples)`,
    MiB(x.hwmBytes),
    `${MiB(x.limitBytes)} (${x.limit})`,
    `${((Math.max(x.hwmBytes, x.peakRssBytes) / x.limitBytes) * 100).toFixed(0)}%`,
    x.survived ? "yes" : "no",
  ];
  const overloadColumns = [o, oi].map(overloadColumn);
  const overloadRows = ["calls answered", "peak RSS", "VmHWM (high-water mark since start)", "deploy/ container memory limit", "highest of the two / limit", "alive and ready afterwards"].map((measure, i) => [
    measure,
    ...overloadColumns.map((c) => c[i]!),
  ]);
  const m = r.machine;
  return [
    `csi-addons-healer bench (${r.mode}), ${r.timestamp}`,
    `node ${r.node}, ${m.platform} ${m.arch} ${m.kernel}, ${m.cpus} x ${m.cpuModel}, ${MiB(m.totalMemoryBytes)} RAM, load average ${m.loadAverage1mAtStart.toFixed(2)} at the start, ${m.loadAverage1m.toFixed(2)} at the end (${m.cpus} cores; above that, other work competed)` +
      (r.git ? `, commit ${r.git.commit.slice(0, 12)}${r.git.dirty ? " (dirty)" : ""}` : ""),
    `sidecar: node ${r.sidecar.entry} (${r.sidecar.build})` + (m.workDir ? `; sockets, state files and logs in ${m.workDir}` : ""),
    "",
    renderRestart(r.restartHeal),
    renderQueueScale(r.controllerQueue),
    renderControllerScale(r.controllerScale),
    "",
    `1. Relay overhead: GetVolumeHealth, direct = healer.v1 on the driver's unix socket, sidecar = sidecar.v1 over TCP (${r.relay.map((x) => `${x.direct.calls} calls at ${x.concurrency}`).join(", ")}; the four paths take turns, ${r.relay[0]!.rounds} rounds each)`,
    "   bare = the same healer.v1 calls over TCP through a relay that only forwards HTTP/2 bytes (test/bench/bare-relay.ts): one Node hop and nothing else",
    "   grpc-js = the same through grpc-js's server and the sidecar's driver client, messages left as bytes, winston and prom-client loaded (test/bench/grpc-js-relay.ts): the decided stack and nothing else",
    formatTable(["callers", "measure", "direct", "via sidecar", "sidecar/direct", "via bare relay", "bare/direct", "via grpc-js relay", "grpc-js/direct"], relayRows),
    "",
    `2. Heal-all burst: ${b.volumes} volumes on one node, driver heal delay ${b.healDelayMs} ms, --max-inflight ${b.maxInflight} --max-queue ${b.maxQueue}`,
    `   direct = the driver alone, ${b.maxInflight} calls at once; via sidecar = all ${b.volumes} HealVolume(ALWAYS) at once: ${Object.entries(b.sidecar.outcomes).map(([k, n]) => `${n} ${k}`).join(", ")}`,
    formatTable(["measure", "direct", "via sidecar", "sidecar/direct"], burstRows),
    `   API requests in the burst: ${perHeal}`,
    "",
    "3. Sidecar process (compiled) memory and start-up, the driver already running",
    formatTable(["measure", "sidecar"], sidecarRows),
    "",
    `4. Sustained overload: ${o.callers} callers each sending HealVolume(ALWAYS) again as soon as answered, for ${o.seconds} s, driver heal delay ${o.healDelayMs} ms, default --max-inflight/--max-queue`,
    `   under deploy/'s settings: NODE_OPTIONS="${o.nodeOptions}", memory limit ${o.limit} (deploy/${o.deployFiles.join(", deploy/")})`,
    `   and as the image starts the sidecar in a pod that sets no NODE_OPTIONS: its ENTRYPOINT script alone, NODE_OPTIONS unset${oi.nodeOptions ? ` (given: ${oi.nodeOptions})` : ""}`,
    formatTable(["measure", "deploy/'s NODE_OPTIONS", "no NODE_OPTIONS"], overloadRows),
  ].join("\n");
}

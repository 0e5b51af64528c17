// The sidecar's targets table from one run: every measure, its target and whether the run met it, then the
// soak's own checks. Printed after the detailed tables.
import { formatTable } from "../demo/table.js";
import { mib } from "./memory.js";
import { ratioVs } from "./ratio.js";
import type { LoadResult } from "./load.js";
import type { Results } from "./report.js";
import { requestTotal } from "./kube.js";
import { isHealPath, isRead } from "./restart.js";


/**
 * Where a relay that does nothing a sidecar must bounds the measure, what each measured in the same
 * run: `bare` (bare-relay.ts, bytes forwarded, nothing else) and `grpcJs` (grpc-js-relay.ts, the
 * decided stack relaying bytes).
 */
type Row = [measure: string, measured: string, target: string, met: boolean, floors?: { bare: string; grpcJs: string }];

const msStr = (v: number) => `${Math.round(v)} ms`;
const MiB = (b: number) => `${mib(b).toFixed(1)} MiB`;

export function targetRows(r: Results): Row[] {
  const one = r.relay.find((c) => c.concurrency === 1)!;
  const many = r.relay.find((c) => c.concurrency === 64)!;
  const p50 = one.sidecar.p50Ms / one.direct.p50Ms;
  const tput = many.sidecar.throughputPerS / many.direct.throughputPerS;
  const burst = r.burst.sidecar.wallMs / r.burst.direct.wallMs;
  const p50Of = (l: LoadResult) => `${(l.p50Ms / one.direct.p50Ms).toFixed(2)}x`;
  const tputOf = (l: LoadResult) => `${(l.throughputPerS / many.direct.throughputPerS).toFixed(2)}x`;
  const reconnect = r.reconnectMs;
  const s = r.soak;
  // What serving the heals read; the sidecar's own periodic reads of its CSIAddonsNode and Pod
  // during the burst are counted in the total only.
  // A PV's watch reads it too: its first event is the PV (relay/pv-cache.ts).
  const healPath = requestTotal(r.burst.apiRequests, (k) => isRead(k) && isHealPath(k)) / r.burst.volumes;
  return [
    ["GetVolumeHealth p50, via sidecar / direct, 1 caller", ratioVs(p50, 1.5), "<= 1.5x", p50 <= 1.5, { bare: p50Of(one.bare), grpcJs: p50Of(one.grpcJs) }],
    ["throughput at 64 callers, via sidecar / direct", ratioVs(tput, 0.7), ">= 0.7x", tput >= 0.7, { bare: tputOf(many.bare), grpcJs: tputOf(many.grpcJs) }],
    [`heal-all burst, ${r.burst.volumes} volumes, via sidecar / driver alone`, ratioVs(burst, 1.2), "<= 1.2x", burst <= 1.2, { bare: "-", grpcJs: `${(r.burst.grpcJs.wallMs / r.burst.direct.wallMs).toFixed(2)}x` }],
    [
      "Kubernetes API requests per heal (burst; heal path, all requests)",
      `${healPath.toFixed(2)} (${r.burst.apiRequestsPerHeal.toFixed(3)})`,
      "<= 2",
      healPath <= 2,
    ],
    ["Kubernetes API requests per repeated health check", r.apiRequestsPerRepeatedCheck.toFixed(2), "0", r.apiRequestsPerRepeatedCheck === 0],
    ["idle RSS", MiB(r.memory.idleRssBytes), "<= 60 MiB", mib(r.memory.idleRssBytes) <= 60, { bare: MiB(r.memory.bareRelayIdleRssBytes), grpcJs: MiB(r.memory.grpcJsRelayIdleRssBytes) }],
    [`peak RSS in the ${r.burst.volumes}-volume burst`, MiB(r.memory.peakRssBytes), "<= 90 MiB", mib(r.memory.peakRssBytes) <= 90, { bare: "-", grpcJs: MiB(r.burst.grpcJs.peakRssBytes) }],
    [
      `process start -> SERVING (driver already up), median of ${r.startup.repeated.starts} starts`,
      msStr(r.startup.repeated.median.processStartToServingMs),
      "<= 300 ms",
      r.startup.repeated.median.processStartToServingMs <= 300,
    ],
    [
      `driver back -> SERVING, worst of ${s.reconnectMs.length} restarts`,
      reconnect === null ? "not measured" : msStr(reconnect),
      "<= 300 ms",
      reconnect !== null && reconnect <= 300,
    ],
    [`soak: calls answered / sent (${s.callers} callers, ${s.minutes} min)`, `${s.answered} / ${s.sent}`, "all", s.answered === s.sent && s.sent > 0],
    [`soak: calls slower than their deadline (${s.deadlineMs} ms)`, `${s.lateCalls} (slowest ${msStr(s.maxLatencyMs)})`, "0", s.lateCalls === 0],
    ["soak: RSS at the end vs after the first minute", `${(s.rssGrowth * 100).toFixed(1)}% (${MiB(s.rssAfterFirstMinuteBytes)} -> ${MiB(s.rssEndBytes)})`, "<= 10%", s.rssGrowth <= 0.1],
    ["soak: driverRestartedAt annotations / driver restarts", `${s.restartAnnotations} / ${s.driverRestarts}`, "equal", s.restartAnnotations === s.driverRestarts],
  ];
}

/**
 * The relay targets no Node relay can reach, read against what the decided stack takes by
 * itself in the same run (grpc-js-relay.ts, the grpc-js relay floor).
 */
export function grpcJsFloorRows(r: Results): Row[] {
  const one = r.relay.find((c) => c.concurrency === 1)!;
  const many = r.relay.find((c) => c.concurrency === 64)!;
  const p50 = one.sidecar.p50Ms / one.grpcJs.p50Ms;
  const tput = many.sidecar.throughputPerS / many.grpcJs.throughputPerS;
  const cpu = many.cpuUsPerCall.sidecar / many.cpuUsPerCall.grpcJs;
  const idle = mib(r.memory.idleRssBytes) - mib(r.memory.grpcJsRelayIdleRssBytes);
  const burst = r.burst.sidecar.wallMs / r.burst.grpcJs.wallMs;
  const one1 = r.restartHeal.oneNode;
  const restart = one1.healer.backToLastHealedMs / one1.grpcJsFloor.wallMs;
  const runs = one1.runs ?? [];
  const met = runs.filter((x) => x.backToLastHealedMs / x.grpcJsFloorMs <= 1.3).length;
  return [
    ["GetVolumeHealth p50, 1 caller, sidecar / grpc-js relay", `${p50.toFixed(2)}x`, "<= 1.25x", p50 <= 1.25],
    ["throughput at 64 callers, sidecar / grpc-js relay", `${tput.toFixed(2)}x`, ">= 0.85x", tput >= 0.85],
    ["CPU per call at 64 callers, sidecar / grpc-js relay", `${cpu.toFixed(2)}x`, "<= 1.3x", cpu <= 1.3],
    ["idle RSS, sidecar - grpc-js relay", `${idle >= 0 ? "+" : ""}${idle.toFixed(1)} MiB`, "<= +8 MiB", idle <= 8],
    [`heal-all burst, ${r.burst.volumes} volumes, sidecar / grpc-js relay`, `${burst.toFixed(2)}x`, "<= 1.15x", burst <= 1.15],
    [
      `one-node restart heal, ${one1.volumes} volumes, drivers back -> last HEALED / grpc-js relay floor`,
      `${restart.toFixed(2)}x${runs.length > 1 ? ` (median of ${runs.length} runs; ${met} of ${runs.length} at or under 1.3x)` : ""}`,
      "<= 1.3x",
      restart <= 1.3,
    ],
  ];
}

export function renderTargets(r: Results): string {
  const rows = targetRows(r);
  const floorRows = grpcJsFloorRows(r);
  const codes = Object.entries(r.soak.byCode).map(([k, n]) => `${n} ${k}`).join(", ");
  return [
    `5. The sidecar's targets, this run, the soak included (met: ${rows.filter((row) => row[3]).length} of ${rows.length})`,
    formatTable(
      ["measure", "measured", "target", "met", "bare relay", "grpc-js relay"],
      rows.map(([m, v, t, ok, floors]) => [m, v, t, ok ? "yes" : "NO", floors?.bare ?? "-", floors?.grpcJs ?? "-"]),
    ),
    "   bare relay: the same measure of test/bench/bare-relay.ts in this run, a relay that only forwards HTTP/2 bytes (no gRPC library, Kubernetes, auth, limits, logs or metrics): what one Node hop takes by itself",
    "   grpc-js relay: the same of test/bench/grpc-js-relay.ts, grpc-js's server and the sidecar's driver client relaying bytes, winston and prom-client loaded: what the decided stack takes by itself",
    `   soak answers: ${codes}; ${r.soak.apiOutages} API outages (watches dropped, 500s), reconnects ${r.soak.reconnectMs.map((v) => `${v} ms`).join(", ") || "none"}`,
    "",
    `   The same relay targets read against the grpc-js relay, the floor of any relay on the decided stack (met: ${floorRows.filter((row) => row[3]).length} of ${floorRows.length})`,
    formatTable(
      ["measure", "measured", "target", "met"],
      floorRows.map(([m, v, t, ok]) => [m, v, t, ok ? "yes" : "NO"]),
    ),
  ].join("\n");
}

// The cluster bench's table (cluster.ts, sidecar-scale.ts) and the cluster's targets with their verdicts.
import { formatTable } from "../demo/table.js";
import type { ClusterResult } from "./cluster.js";
import { mib } from "./memory.js";
import type { SidecarAtSize } from "./sidecar-scale.js";

export interface ClusterResults {
  rollout: ClusterResult;
  /** The same real sidecar in a small cluster and a large one, side by side; of each size the median of each figure over the rounds. */
  sidecar: { small: SidecarAtSize; large: SidecarAtSize; runs: SidecarAtSize[]; changesPerSecond: number; windowMs: number };
}

type Row = [measure: string, measured: string, target: string, met: boolean];

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const MiB = (b: number) => `${mib(b).toFixed(1)} MiB`;
const within = (a: number, b: number, frac: number) => Math.abs(b - a) <= frac * Math.max(a, 1e-9);
const pct = (a: number, b: number) => `${(((b - a) / Math.max(a, 1e-9)) * 100).toFixed(1)}%`;
/** Lists that read every object of a resource: informers' start-up lists are before the window; any in it is a re-list. */
const READ_ALL = ["persistentvolumes", "volumeattachments", "nodes", "pods", "persistentvolumeclaims", "csiaddonsnodes", "secrets", "csidrivers"];

export function clusterTargetRows(c: ClusterResults): Row[] {
  const r = c.rollout;
  const bound = 1.5 * r.nodePaceMs;
  const readAll = READ_ALL.reduce((n, k) => n + (r.api.listsNotByName[k] ?? 0), 0);
  const { small, large } = c.sidecar;
  const ctl = r.controller;
  const burst = r.api.realSidecarBurst;
  return [
    [`per node, new sidecar back -> its last volume HEALED, p99 (pace ${s(r.nodePaceMs)})`, s(r.perNode.p99Ms), `<= ${s(bound)}`, r.perNode.p99Ms <= bound],
    [`per node, the worst (${r.perNode.worstNode})`, s(r.perNode.maxMs), `<= ${s(bound)}`, r.perNode.maxMs <= bound],
    ["whole rollout: last node back -> last volume HEALED", `${s(r.rollout.afterLastBackMs)} (${r.rollout.ratioToPace.toFixed(2)}x the pace)`, "<= 1.5x", r.rollout.ratioToPace <= 1.5],
    ["API writes per healed volume, all identities (Events included)", r.api.writesPerVolume.toFixed(3), "<= 1.1", r.api.writesPerVolume <= 1.1],
    ["API reads per healed volume, all identities", r.api.readsPerVolume.toFixed(3), "<= 1.1", r.api.readsPerVolume <= 1.1],
    [
      "API reads per healed volume by a real sidecar just started (its start -> its node healed; of them the heal's own)",
      `${burst.readsPerVolume.toFixed(2)} (${burst.healPathPerVolume.toFixed(2)})`,
      "<= 2",
      burst.readsPerVolume <= 2,
    ],
    ["lists of every object of a resource during the rollout", String(readAll), "0", readAll === 0],
    [`controller peak RSS (${ctl.nodeOptions}; request ${ctl.request}, limit ${ctl.limit})`, MiB(ctl.peakRssBytes), `<= ${ctl.limit}`, ctl.peakRssBytes <= ctl.limitBytes],
    [`real sidecar peak RSS, ${small.pvs} vs ${large.pvs} PVs`, `${MiB(small.peakRssBytes)} vs ${MiB(large.peakRssBytes)} (${pct(small.peakRssBytes, large.peakRssBytes)})`, "within 5%", within(small.peakRssBytes, large.peakRssBytes, 0.05)],
    [`real sidecar CPU, ${small.pvs} vs ${large.pvs} PVs`, `${Math.round(small.cpuMs)} vs ${Math.round(large.cpuMs)} ms (${pct(small.cpuMs, large.cpuMs)})`, "within 5%", within(small.cpuMs, large.cpuMs, 0.05)],
    [`real sidecar watch events received, ${small.pvs} vs ${large.pvs} PVs`, `${small.watchEvents} vs ${large.watchEvents}`, "within 5%", within(small.watchEvents, large.watchEvents, 0.05)],
  ];
}

export function renderCluster(c: ClusterResults): string {
  const r = c.rollout;
  const rows = clusterTargetRows(c);
  const identity = Object.entries(r.api.byIdentity).map(([who, byKey]) => `     ${who}: ${Object.entries(byKey).map(([k, n]) => `${k} ${n}`).join(", ")}`);
  const { small, large } = c.sidecar;
  return [
    `6. A cluster: ${r.fleet.nodes} nodes x ${r.fleet.volumesPerNode} volumes (${r.volumes}), the node plugin's DaemonSet upgraded ${r.waves} waves of ${Math.round(r.waveFraction * 100)}% ${s(r.waveGapMs)} apart; ${r.realNodes} nodes real (driver-stub and sidecar), the rest simulated (cluster-sim.ts); heal ${r.healMs} ms, ${r.perNodeConcurrency} per node, the controller's default --max-concurrent-heals`,
    `   rollout start -> last node back ${s(r.rollout.lastBackMs)}, -> last volume HEALED ${s(r.rollout.lastHealedMs)}; per node back -> last HEALED: p50 ${s(r.perNode.p50Ms)}, p99 ${s(r.perNode.p99Ms)}, max ${s(r.perNode.maxMs)} (${r.perNode.worstNode}; the real nodes' worst ${s(r.perNode.realMaxMs)}); back -> first heal at the driver p50 ${s(r.perNode.firstHealP50Ms)}, p99 ${s(r.perNode.firstHealP99Ms)}`,
    `   ALWAYS heals ${r.heals.always} for ${r.heals.volumes} volumes (${r.heals.repeated} healed more than once), at most ${r.heals.peakInFlight} at once, ${r.heals.refused} calls refused by the simulated sidecars; Events written ${r.api.eventsWritten}`,
    `   controller: peak RSS ${MiB(r.controller.peakRssBytes)}, CPU ${r.controller.cpuSeconds.toFixed(1)} s; API server CPU ${r.cpuSeconds.apiServer.toFixed(1)} s; simulated sidecars CPU ${r.cpuSeconds.simulatedSidecars.toFixed(1)} s`,
    `   API requests per healed volume: writes ${r.api.writesPerVolume.toFixed(3)}, reads ${r.api.readsPerVolume.toFixed(3)}, access reviews ${r.api.reviewsPerVolume.toFixed(3)}; by identity:`,
    ...identity,
    `   the real sidecars, from each one's start to its node's volumes healed: ${r.api.realSidecarBurst.readsPerVolume.toFixed(2)} reads per volume (${Object.entries(r.api.realSidecarBurst.requests).map(([k, n]) => `${k} ${n}`).join(", ")}); over the whole rollout, their old and new pods' periodic reads included, ${r.api.realSidecarReadsPerVolume.toFixed(2)}`,
    `   a real sidecar with ${c.sidecar.changesPerSecond} PV changes a second elsewhere, ${s(c.sidecar.windowMs)}, ${c.sidecar.runs.length / 2} rounds of both sizes side by side over the same window (${c.sidecar.runs.map((x) => `${x.pvs} PVs ${Math.round(x.cpuMs)} ms ${MiB(x.peakRssBytes)} ${x.watchEvents} events`).join(", ")}), the median of each figure: ${small.pvs} PVs: ${MiB(small.peakRssBytes)}, ${Math.round(small.cpuMs)} ms CPU, ${small.watchEvents} watch events, ${small.requests} requests; ${large.pvs} PVs: ${MiB(large.peakRssBytes)}, ${Math.round(large.cpuMs)} ms CPU, ${large.watchEvents} watch events, ${large.requests} requests`,
    "",
    `   The cluster's targets, this run (met: ${rows.filter((x) => x[3]).length} of ${rows.length})`,
    formatTable(
      ["measure", "measured", "target", "met"],
      rows.map(([m, v, t, ok]) => [m, v, t, ok ? "yes" : "NO"]),
    ),
  ].join("\n");
}

// The controller's /metrics as README documents them: every family with its type and labels, the
// histograms' buckets (dashboards and alerts are written against them), and prom-client's process
// metrics on the same registry.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createMetrics } from "../../../../controller/report/metrics.js";

test("every documented family, with its type and labels; the sidecar connections are read from the pool at each scrape", async () => {
  let connections = { serving: 2, not_serving: 1, unreachable: 1, failing: 1, unresolved: 0, refused: 1 };
  const m = createMetrics(() => connections);
  m.heals.inc({ driver: "drv", trigger: "restart", result: "HEALED" });
  m.healSeconds.observe({ driver: "drv", mode: "ALWAYS" }, 0.2);
  m.restartHealSeconds.observe({ driver: "drv" }, 3);
  m.volumesAbnormal.set({ driver: "drv", node: "n1" }, 1);
  m.leader.set(1);
  m.eventsDropped.inc();
  m.eventsQueued.set(4);
  m.endpointsRefused.inc({ driver: "drv", reason: "node" });
  m.sidecarsNotHealing.set({ driver: "drv" }, 2);
  const text = await m.registry.metrics();
  for (const [name, type] of [
    ["csi_addons_healer_heals_total", "counter"],
    ["csi_addons_healer_heal_duration_seconds", "histogram"],
    ["csi_addons_healer_restart_heal_duration_seconds", "histogram"],
    ["csi_addons_healer_volumes_abnormal", "gauge"],
    ["csi_addons_healer_sidecar_connections", "gauge"],
    ["csi_addons_healer_leader", "gauge"],
    ["csi_addons_healer_events_queued", "gauge"],
    ["csi_addons_healer_events_dropped_total", "counter"],
    ["csi_addons_healer_sidecar_endpoints_refused_total", "counter"],
    ["csi_addons_healer_sidecars_not_healing", "gauge"],
  ]) {
    assert.match(text, new RegExp(`^# TYPE ${name} ${type}$`, "m"), name);
  }
  for (const sample of [
    'csi_addons_healer_heals_total{driver="drv",trigger="restart",result="HEALED"} 1',
    'csi_addons_healer_heal_duration_seconds_count{driver="drv",mode="ALWAYS"} 1',
    'csi_addons_healer_restart_heal_duration_seconds_count{driver="drv"} 1',
    'csi_addons_healer_volumes_abnormal{driver="drv",node="n1"} 1',
    'csi_addons_healer_sidecar_connections{state="serving"} 2',
    'csi_addons_healer_sidecar_connections{state="not_serving"} 1',
    'csi_addons_healer_sidecar_connections{state="unreachable"} 1',
    'csi_addons_healer_sidecar_connections{state="failing"} 1',
    'csi_addons_healer_sidecar_connections{state="refused"} 1',
    'csi_addons_healer_sidecar_endpoints_refused_total{driver="drv",reason="node"} 1',
    'csi_addons_healer_sidecars_not_healing{driver="drv"} 2',
    "csi_addons_healer_leader 1",
    "csi_addons_healer_events_queued 4",
    "csi_addons_healer_events_dropped_total 1",
  ]) {
    assert.ok(text.split("\n").includes(sample), sample);
  }
  connections = { serving: 0, not_serving: 0, unreachable: 0, failing: 0, unresolved: 3, refused: 0 };
  assert.ok((await m.registry.metrics()).split("\n").includes('csi_addons_healer_sidecar_connections{state="unresolved"} 3'), "read again at the next scrape");
});

test("the histograms' buckets: one call from 10 ms to 3 min, a node's restart heal from 0.5 s to 10 min", async () => {
  const m = createMetrics(() => ({}));
  m.healSeconds.observe({ driver: "drv", mode: "ALWAYS" }, 1);
  m.restartHealSeconds.observe({ driver: "drv" }, 1);
  const buckets = async (h: { get(): Promise<{ values: { metricName?: string; labels: Record<string, string | number> }[] }> }) =>
    (await h.get()).values.filter((v) => v.metricName?.endsWith("_bucket") && v.labels["le"] !== "+Inf").map((v) => Number(v.labels["le"]));
  assert.deepEqual(await buckets(m.healSeconds), [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180]);
  assert.deepEqual(await buckets(m.restartHealSeconds), [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600]);
});

test("prom-client's process metrics are on the same registry", async () => {
  const text = await createMetrics(() => ({})).registry.metrics();
  for (const name of ["process_cpu_seconds_total", "process_resident_memory_bytes", "nodejs_eventloop_lag_seconds", "nodejs_heap_size_used_bytes"]) {
    assert.match(text, new RegExp(`^# TYPE ${name} `, "m"), name);
  }
});

// sidecar/metrics: named and bucketed as kubernetes-csi/csi-lib-utils does, so dashboards for the
// Go sidecars work unchanged (DESIGN 4.5); refusals counted by reason from 0; the controller
// port's certificate source and expiry; process metrics without the event-loop histogram gauges
// whose timer would wake an idle sidecar 100 times a second.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createMetrics, OPERATION_BUCKETS, REFUSAL_REASONS } from "../../../../sidecar/metrics/metrics.js";

const lines = async (m: ReturnType<typeof createMetrics>) => (await m.registry.metrics()).split("\n");

test("csi_sidecar_operations_seconds: csi-lib-utils' buckets and labels", async () => {
  const m = createMetrics();
  m.observeOperation("rbd.csi.ceph.com", "/healer.v1.VolumeHealerNode/NodeHealVolume", "OK", 0.3);
  const text = await lines(m);
  assert.ok(text.includes("# TYPE csi_sidecar_operations_seconds histogram"));
  const labels = 'driver_name="rbd.csi.ceph.com",method_name="/healer.v1.VolumeHealerNode/NodeHealVolume",grpc_status_code="OK"';
  const buckets = text.filter((l) => l.startsWith("csi_sidecar_operations_seconds_bucket{"));
  assert.deepEqual(
    buckets.map((l) => /le="([^"]+)"/.exec(l)?.[1]).filter((le) => le !== "+Inf"),
    OPERATION_BUCKETS.map(String),
  );
  assert.deepEqual(OPERATION_BUCKETS, [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600]);
  assert.ok(
    text.some((l) => l.startsWith("csi_sidecar_operations_seconds_count{") && l.includes(labels) && l.endsWith(" 1")),
    text.join("\n"),
  );
  assert.ok(text.some((l) => /^csi_sidecar_operations_seconds_bucket\{le="0\.5",.*\} 1$/.test(l)));
  assert.ok(text.some((l) => /^csi_sidecar_operations_seconds_bucket\{le="0\.25",.*\} 0$/.test(l)));
});

test("refusals: every reason exported from 0, so the first one shows in a rate()", async () => {
  const m = createMetrics();
  assert.deepEqual(
    (await lines(m)).filter((l) => l.startsWith("csi_addons_sidecar_refused_total{")),
    REFUSAL_REASONS.map((r) => `csi_addons_sidecar_refused_total{reason="${r}"} 0`),
  );
  m.countRefused("unauthenticated");
  m.countRefused("unauthenticated");
  assert.ok((await lines(m)).includes('csi_addons_sidecar_refused_total{reason="unauthenticated"} 2'));
});

test("the controller port's certificate: one source at 1, its expiry in seconds; none when plaintext", async () => {
  const m = createMetrics();
  m.setTlsCertificate("self-signed", new Date("2027-01-01T00:00:00Z"));
  let text = await lines(m);
  for (const [s, v] of [
    ["files", 0],
    ["self-signed", 1],
    ["none", 0],
  ] as const)
    assert.ok(text.includes(`csi_addons_sidecar_tls_certificate_source{source="${s}"} ${v}`), s);
  assert.ok(text.includes(`csi_addons_sidecar_tls_certificate_expiry_timestamp_seconds{source="self-signed"} ${Date.parse("2027-01-01T00:00:00Z") / 1000}`));
  m.setTlsCertificate("none", undefined);
  text = await lines(m);
  assert.ok(text.includes('csi_addons_sidecar_tls_certificate_source{source="none"} 1'));
  assert.ok(text.includes('csi_addons_sidecar_tls_certificate_source{source="self-signed"} 0'));
  assert.deepEqual(
    text.filter((l) => l.startsWith("csi_addons_sidecar_tls_certificate_expiry_timestamp_seconds{")),
    [],
    "no expiry series left behind",
  );
});

test("process metrics, with the event-loop lag measured at scrape time and none of the histogram gauges", async () => {
  const text = await lines(createMetrics());
  for (const name of ["process_cpu_seconds_total", "process_resident_memory_bytes", "nodejs_heap_size_used_bytes", "nodejs_eventloop_lag_seconds"]) {
    assert.ok(
      text.some((l) => l.startsWith(`# TYPE ${name} `)),
      name,
    );
  }
  for (const s of ["min", "max", "mean", "stddev", "p50", "p90", "p99"]) {
    assert.ok(!text.some((l) => l.startsWith(`# TYPE nodejs_eventloop_lag_${s}_seconds `)), s);
  }
});

// A burst: 500 concurrent HealVolume calls at 50 PVs with --max-inflight 8 and a slow driver.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { call, codeName } from "../../support/grpc.js";
import { pv, volumeAttachment } from "../../support/fixtures.js";
import { peakOverlap } from "../../support/intervals.js";
import { HealVolumeRequest_Mode as Mode } from "../../../proto/gen/sidecar/v1/healer.js";
import { reasonFor } from "../../support/heal-request.js";

const PVS = 50;
const CALLS = 500;
const MAX_INFLIGHT = 8;

let kube: KubeApi;
let stub: DriverStub;
let sidecar: SidecarProc;

before(async () => {
  const seed: unknown[] = [];
  const volumes: Record<string, { state: "ABNORMAL"; delayMs: number }> = {};
  for (let i = 0; i < PVS; i++) {
    seed.push(pv(`pv-${i}`, { handle: `vol-${i}` }), volumeAttachment(`pv-${i}`, `vol-${i}`));
    volumes[`vol-${i}`] = { state: "ABNORMAL", delayMs: 300 };
  }
  kube = await startTestKube(seed);
  const dir = tempDir();
  stub = await startDriverStub({ dir, state: { volumes } });
  sidecar = await startSidecarProc({
    driverSocket: join(dir, "addons.sock"),
    kubeconfig: kube.kubeconfigPath,
    args: [`--max-inflight=${MAX_INFLIGHT}`, "--max-queue=16"],
  });
  await waitHealth(sidecar, "SERVING");
});

after(async () => {
  try {
    assert.deepEqual(stub.csiCalls(), []);
  } finally {
    await sidecar?.stop();
    await stub?.stop();
    await kube?.stop();
  }
});

test("500 concurrent heals at 50 PVs: ≤ 8 driver calls at once, duplicates coalesced, excess RESOURCE_EXHAUSTED, none unanswered", async () => {
  const client = sidecar.healer();
  kube.counters.reset();
  const outcomes = await Promise.all(
    Array.from({ length: CALLS }, (_, i) =>
      call(client, client.healVolume, { pvName: `pv-${i % PVS}`, mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, { deadlineMs: 60_000 }),
    ),
  );
  assert.equal(outcomes.length, CALLS, "every request answered");
  const byCode = new Map<string, number>();
  for (const o of outcomes) {
    const k = o.ok ? "OK" : codeName(o.code);
    byCode.set(k, (byCode.get(k) ?? 0) + 1);
  }
  assert.deepEqual([...byCode.keys()].sort(), ["OK", "RESOURCE_EXHAUSTED"], JSON.stringify([...byCode]));
  const exhausted = outcomes.find((o) => !o.ok && o.code === grpc.status.RESOURCE_EXHAUSTED);
  assert.match((exhausted as { details: string }).details, /8 in flight and 16 waiting/);

  const heals = stub.calls({ method: "NodeHealVolume" });
  const peak = peakOverlap(heals);
  assert.ok(peak <= MAX_INFLIGHT, `peak ${peak} driver calls at once`);
  assert.ok(peak >= 2, "the driver did work concurrently");
  // Without single flight every OK answer would be a driver call of its own.
  assert.ok(byCode.get("OK")! >= 2 * heals.length, `duplicates coalesced: ${byCode.get("OK")} OK answers from ${heals.length} driver calls`);
  const reads = kube.counters.get("get", "persistentvolumes") + kube.counters.get("get", "volumeattachments");
  const perHeal = kube.counters.total() / heals.length;
  console.log(
    `burst: ${byCode.get("OK")} OK, ${byCode.get("RESOURCE_EXHAUSTED")} RESOURCE_EXHAUSTED, ${heals.length} driver heals, peak ${peak} at once, ${kube.counters.total()} API requests (${reads} PV/VA reads) = ${perHeal.toFixed(2)} per driver heal`,
  );
  // One PV read and one VolumeAttachment read per healed volume, and the watch of that PV (by name:
  // it keeps the PV for every later request); refused requests cost nothing.
  const watches = kube.counters.byName("watch", "persistentvolumes");
  assert.equal(watches[""], undefined, "no watch of the PV collection");
  assert.ok(Object.values(watches).every((n) => n === 1) && Object.keys(watches).length <= heals.length, `one watch per healed PV: ${JSON.stringify(watches)}`);
  assert.ok(reads / heals.length <= 2.2, `about two API reads per heal, got ${reads / heals.length}`);
  assert.ok(perHeal <= 3.2, `about three API requests per heal (two reads, one watch), got ${perHeal}`);
});

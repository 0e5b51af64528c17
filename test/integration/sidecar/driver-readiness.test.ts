// A driver whose Probe says ready: false is not SERVING, and calls fail fast with
// UNAVAILABLE without costing a Kubernetes API request; once Probe says ready, SERVING.
// And the same for a driver that was ready and comes back saying ready: false, where the
// sidecar still holds the identity and capabilities of its last connection.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { restartDriverStub, startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { call, codeName } from "../../support/grpc.js";
import { waitFor } from "../../support/wait.js";
import { pv, volumeAttachment } from "../../support/fixtures.js";
import { HealVolumeRequest_Mode as Mode } from "../../../proto/gen/sidecar/v1/healer.js";
import { reasonFor } from "../../support/heal-request.js";

let kube: KubeApi;
const stubs: DriverStub[] = [];
const sidecars: SidecarProc[] = [];

/** Requests the relay would make for a volume; the sidecar's own Node watch and start-up reads are not among them. */
const RELAY_READS = ["persistentvolumes", "volumeattachments", "secrets"];
const VOLUMES = { "vol-a": { state: "HEALTHY" as const }, "vol-b": { state: "HEALTHY" as const } };

before(async () => {
  kube = await startTestKube([
    pv("pv-a", { handle: "vol-a" }),
    volumeAttachment("pv-a", "vol-a"),
    pv("pv-b", { handle: "vol-b" }),
    volumeAttachment("pv-b", "vol-b"),
  ]);
});

after(async () => {
  for (const s of sidecars) await s.stop();
  for (const s of stubs) await s.stop();
  await kube?.stop();
});

async function start(ready: boolean): Promise<{ stub: DriverStub; sidecar: SidecarProc }> {
  const stub = await startDriverStub({ state: { ready, volumes: VOLUMES } });
  stubs.push(stub);
  const sidecar = await startSidecarProc({ driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath });
  sidecars.push(sidecar);
  return { stub, sidecar };
}

/** Probes the stub (this process of it) has answered. */
const probes = (stub: DriverStub) => stub.calls({ method: "/identity.Identity/Probe" }).filter((c) => c.t0 >= stub.readyAt).length;

/** Both healer methods for the PV: each UNAVAILABLE, with no relay read of the API and no driver call. */
async function assertRefusedAtOnce(sidecar: SidecarProc, stub: DriverStub, pvName: string): Promise<void> {
  const driverCalls = () => stub.calls({ method: "NodeGetVolumeHealth" }).length + stub.calls({ method: "NodeHealVolume" }).length;
  const before = driverCalls();
  const client = sidecar.healer();
  kube.counters.reset();
  for (const r of [
    await call(client, client.getVolumeHealth, { pvName }, { deadlineMs: 10_000 }),
    await call(client, client.healVolume, { pvName, mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, { deadlineMs: 10_000 }),
  ]) {
    assert.equal(r.ok, false);
    assert.equal(codeName((r as { code: number }).code), "UNAVAILABLE", (r as { details: string }).details);
  }
  for (const resource of RELAY_READS) assert.equal(kube.counters.total({ resource }), 0, `no ${resource} request while the driver is not ready`);
  assert.equal(driverCalls(), before, "the driver was not called");
}

test("Probe ready: false → NOT_SERVING and /readyz 503; calls fail fast with UNAVAILABLE and no API request; ready → SERVING", async () => {
  const { stub, sidecar } = await start(false);
  // The sidecar has asked Probe at least twice: it has seen "not ready" and kept asking.
  await waitFor("the sidecar probing the unready driver", () => probes(stub) >= 2, { timeoutMs: 20_000 });
  assert.equal(await sidecar.health(), "NOT_SERVING");
  assert.equal(await sidecar.readyz(), 503);
  const readyz = (method: string) => fetch(`http://127.0.0.1:${sidecar.httpPort}/readyz`, { method });
  assert.equal((await readyz("HEAD")).status, 503, "HEAD answers like GET");
  assert.equal((await readyz("POST")).status, 405, "other methods are refused");
  await assertRefusedAtOnce(sidecar, stub, "pv-a");

  stub.updateState((s) => ({ ...s, ready: true }));
  await waitHealth(sidecar, "SERVING");
  assert.equal(await sidecar.readyz(), 200);
  const client = sidecar.healer();
  const ok = await call(client, client.getVolumeHealth, { pvName: "pv-a" });
  assert.ok(ok.ok, JSON.stringify(ok));
});

test("a driver that was ready comes back with Probe ready: false → NOT_SERVING; calls fail fast with UNAVAILABLE, no API request, no driver call", async () => {
  const first = await start(true);
  const sidecar = first.sidecar;
  let stub = first.stub;
  await waitHealth(sidecar, "SERVING");
  const client = sidecar.healer();
  const ok = await call(client, client.getVolumeHealth, { pvName: "pv-a" });
  assert.ok(ok.ok, JSON.stringify(ok));

  // Same volumes, new process, not ready: the sidecar keeps what it knew of the last one.
  stub = await restartDriverStub(stub, { state: { ready: false, volumes: VOLUMES } });
  stubs.push(stub);
  await waitFor("the sidecar probing the driver again, and hearing 'not ready' more than once", () => probes(stub) >= 2, { timeoutMs: 20_000 });
  assert.equal(await sidecar.health(), "NOT_SERVING");
  assert.equal(await sidecar.readyz(), 503);
  // pv-b was never asked for: nothing of it is cached, so any relay work would read the API.
  await assertRefusedAtOnce(sidecar, stub, "pv-b");

  stub.updateState((s) => ({ ...s, ready: true }));
  await waitHealth(sidecar, "SERVING");
  const healed = await call(client, client.getVolumeHealth, { pvName: "pv-b" });
  assert.ok(healed.ok, JSON.stringify(healed));
});

// Issue 15: a driver whose Probe says ready: false is not SERVING, and calls fail fast with
// UNAVAILABLE without costing a Kubernetes API request; once Probe says ready, SERVING.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi } from "../kube/index.js";
import { startTestKube } from "../support/cluster.js";
import { startDriverStub, type DriverStub } from "../support/driver-stub.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../support/sidecar.js";
import { call, codeName } from "../support/grpc.js";
import { waitFor } from "../support/wait.js";
import { pv, volumeAttachment } from "../support/fixtures.js";
import { HealVolumeRequest_Mode as Mode } from "../../proto/gen/sidecar/v1/healer.js";

let kube: KubeApi;
let stub: DriverStub;
let sidecar: SidecarProc;

/** Requests the relay would make for a volume; the sidecar's own Node watch and start-up reads are not among them. */
const RELAY_READS = ["persistentvolumes", "volumeattachments", "secrets"];

before(async () => {
  kube = await startTestKube([pv("pv-a", { handle: "vol-a" }), volumeAttachment("pv-a", "vol-a")]);
  stub = await startDriverStub({ state: { ready: false, volumes: { "vol-a": { state: "HEALTHY" } } } });
  sidecar = await startSidecarProc({ driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath });
});

after(async () => {
  await sidecar?.stop();
  await stub?.stop();
  await kube?.stop();
});

test("Probe ready: false → NOT_SERVING and /readyz 503; calls fail fast with UNAVAILABLE and no API request; ready → SERVING", async () => {
  // The sidecar has asked Probe at least twice: it has seen "not ready" and kept asking.
  await waitFor("the sidecar probing the unready driver", () => stub.calls({ method: "/identity.Identity/Probe" }).length >= 2, { timeoutMs: 20_000 });
  assert.equal(await sidecar.health(), "NOT_SERVING");
  assert.equal(await sidecar.readyz(), 503);
  const readyz = (method: string) => fetch(`http://127.0.0.1:${sidecar.httpPort}/readyz`, { method });
  assert.equal((await readyz("HEAD")).status, 503, "HEAD answers like GET");
  assert.equal((await readyz("POST")).status, 405, "other methods are refused");
  const client = sidecar.healer();
  kube.counters.reset();
  for (const r of [await call(client, client.getVolumeHealth, { pvName: "pv-a" }, { deadlineMs: 10_000 }), await call(client, client.healVolume, { pvName: "pv-a", mode: Mode.ALWAYS }, { deadlineMs: 10_000 })]) {
    assert.equal(r.ok, false);
    assert.equal(codeName((r as { code: number }).code), "UNAVAILABLE", (r as { details: string }).details);
  }
  for (const resource of RELAY_READS) assert.equal(kube.counters.total({ resource }), 0, `no ${resource} request while the driver is not ready`);
  assert.equal(stub.calls({ method: "NodeGetVolumeHealth" }).length + stub.calls({ method: "NodeHealVolume" }).length, 0, "the driver was not called");

  stub.updateState((s) => ({ ...s, ready: true }));
  await waitHealth(sidecar, "SERVING");
  assert.equal(await sidecar.readyz(), 200);
  const ok = await call(client, client.getVolumeHealth, { pvName: "pv-a" });
  assert.ok(ok.ok, JSON.stringify(ok));
});

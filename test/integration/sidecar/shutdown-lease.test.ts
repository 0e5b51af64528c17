// SIGTERM of a sidecar that holds its controller plugin's Lease (DESIGN 4.5, README "SIGTERM"):
// releasing the Lease against a slow API must neither let new calls in after NOT_SERVING nor hold
// back the drain, whose grace runs alongside the release.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { healthInFlight, startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { call, codeName } from "../../support/grpc.js";
import { waitFor } from "../../support/wait.js";
import { NAMESPACE, pv, volumeAttachment } from "../../support/fixtures.js";

const LEASE = "stub-csi-example-com-csi-addons";
const POD = "csi-plugin-abcde";
/** Per Lease request once the sidecar leads; a release is a read and a write, so about twice this. */
const LEASE_LATENCY_MS = 1_500;
const GRACE_MS = 1_000;

let kube: KubeApi;
let stub: DriverStub;
let sidecar: SidecarProc | undefined;

before(async () => {
  kube = await startTestKube(["fast", "stuck"].flatMap((n) => [pv(`pv-${n}`, { handle: `vol-${n}` }), volumeAttachment(`pv-${n}`, `vol-${n}`)]));
  stub = await startDriverStub({
    state: { capabilities: { controllerService: true }, volumes: { "vol-fast": { state: "HEALTHY" }, "vol-stuck": { state: "HEALTHY", delayMs: 120_000 } } },
  });
});

after(async () => {
  await sidecar?.stop();
  await stub?.stop();
  await kube?.stop();
});

const holder = () => (kube.get("coordination.k8s.io/v1", "Lease", NAMESPACE, LEASE) as { spec: { holderIdentity?: string } } | undefined)?.spec.holderIdentity;
const received = (volumeId: string) => stub.arrived("NodeGetVolumeHealth", volumeId);

test("SIGTERM while the Lease is being released: new calls are refused at once, and the grace runs alongside the release", async () => {
  // A lease duration and renew deadline far beyond the test: the slow API never costs the lead.
  const election = ["--leader-election-lease-duration=60s", "--leader-election-renew-deadline=40s", "--leader-election-retry-period=300ms"];
  sidecar = await startSidecarProc({
    driverSocket: stub.addonsSocket,
    kubeconfig: kube.kubeconfigPath,
    pod: POD,
    args: [...election, `--shutdown-grace=${GRACE_MS}ms`],
  });
  await waitHealth(sidecar, "SERVING");
  await waitFor("the sidecar holding the Lease", () => holder() === POD, { timeoutMs: 20_000 });
  kube.faults.latency(LEASE_LATENCY_MS, { resource: "leases" });

  const client = sidecar.healer();
  assert.ok((await call(client, client.getVolumeHealth, { pvName: "pv-fast" })).ok, "the client's connection is up");
  const stuck = await healthInFlight(client, stub, "pv-stuck", "vol-stuck", 120_000);

  sidecar.proc.child.kill("SIGTERM");
  await waitFor("/readyz 503", async () => (await sidecar!.readyz()) === 503, { timeoutMs: 3_000 });
  const fastBefore = received("vol-fast");
  const refused = await call(client, client.getVolumeHealth, { pvName: "pv-fast" }, { deadlineMs: 5_000 });
  const stillHeld = holder();
  const releasedYet = sidecar.proc.stdout().includes('"message":"released the Lease"');
  assert.equal(refused.ok, false, "a new call after NOT_SERVING is refused, not served while the Lease is released");
  assert.equal(codeName((refused as { code: number }).code), "UNAVAILABLE", (refused as { details: string }).details);
  assert.equal(received("vol-fast"), fastBefore, "the refused call never reached the driver");
  assert.equal(stillHeld, POD, "refused while the Lease was still held, i.e. during its release");
  assert.equal(releasedYet, false, "refused before the release finished");

  assert.equal(await sidecar.proc.exited, 0);
  const out = sidecar.proc.stdout();
  const cutOff = out.indexOf("grace period over");
  const released = out.indexOf('"message":"released the Lease"');
  assert.ok(cutOff >= 0, "the stuck call was cut off at the grace");
  assert.ok(released >= 0, "the Lease was released");
  assert.ok(cutOff < released, `the grace (${GRACE_MS} ms) ran out during the release (~${2 * LEASE_LATENCY_MS} ms): the drain did not wait for it`);
  assert.equal(holder(), "", "released on SIGTERM");
  const r = await stuck.outcome;
  assert.equal(r.ok, false, "the stuck call was cut off");
});

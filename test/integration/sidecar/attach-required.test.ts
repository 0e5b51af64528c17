// A heal's publish_context as the kubelet makes it (relay/attach-required.ts): a driver whose
// CSIDriver says attachRequired: false gets an empty one, and once that is known no VolumeAttachment
// is read; a driver whose CSIDriver says it attaches is not healed without its VolumeAttachment, and
// its CSIDriver is not read while its volumes have one. Real processes (driver-stub, sidecar) over
// the in-memory API, one stack per CSIDriver.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { call, codeName } from "../../support/grpc.js";
import { DRIVER, csiDriver, pv, userPod, vaName, volumeAttachment } from "../../support/fixtures.js";
import { HealVolumeRequest_Mode as Mode, type VolumeHealerClient } from "../../../proto/gen/sidecar/v1/healer.js";
import { NodeHealVolumeResponse_Result as Result } from "../../../proto/gen/healer/v1/healer.js";
import { reasonFor } from "../../support/heal-request.js";

interface Stack {
  kube: KubeApi;
  stub: DriverStub;
  sidecar: SidecarProc;
  client: InstanceType<typeof VolumeHealerClient>;
}

/**
 * pv-pod (a Pod here mounts its claim), pv-inuse (in the Node's volumesInUse), both without a
 * VolumeAttachment; pv-va attached with metadata, and pv-used too, also in the Node's volumesInUse
 * (so that only the publish_context needs its attachment).
 */
function stackWith(driver: object): { get(): Stack } {
  let s: Stack | undefined;
  before(async () => {
    const kube = await startTestKube(
      [
        driver,
        pv("pv-pod", { handle: "vol-pod", claim: "claim-pod" }),
        userPod("app", ["claim-pod"]),
        pv("pv-inuse", { handle: "vol-inuse" }),
        pv("pv-va", { handle: "vol-va" }),
        volumeAttachment("pv-va", "vol-va", { metadata: { portal: "10.0.0.9:3260" } }),
        pv("pv-used", { handle: "vol-used" }),
        volumeAttachment("pv-used", "vol-used", { metadata: { portal: "10.0.0.7:3260" } }),
      ],
      { volumesInUse: [`kubernetes.io/csi/${DRIVER}^vol-inuse`, `kubernetes.io/csi/${DRIVER}^vol-used`] },
    );
    const stub = await startDriverStub({
      state: { volumes: Object.fromEntries(["vol-pod", "vol-inuse", "vol-va", "vol-used"].map((v) => [v, { state: "ABNORMAL", heal: "SUCCEED" }])) },
    });
    const sidecar = await startSidecarProc({ driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath });
    await waitHealth(sidecar, "SERVING");
    s = { kube, stub, sidecar, client: sidecar.healer() };
  });
  after(async () => {
    await s?.sidecar.stop();
    await s?.stub.stop();
    await s?.kube.stop();
  });
  return { get: () => s! };
}

const heal = (s: Stack, pvName: string) => call(s.client, s.client.healVolume, { pvName, mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) });
const publishContextOf = (s: Stack, volumeId: string) =>
  (s.stub.calls({ method: "NodeHealVolume", volumeId }).at(-1)?.request as { publishContext?: Record<string, string> } | undefined)?.publishContext ?? {};

describe("a driver whose CSIDriver says attachRequired: false (CephFS, NFS)", () => {
  const stack = stackWith(csiDriver(false));

  test("its volumes are healed with an empty publish context; the CSIDriver asked at step 4 (whether the Pods tell), and no VolumeAttachment read", async () => {
    const s = stack.get();
    s.kube.counters.reset();
    for (const name of ["pv-pod", "pv-inuse"]) {
      const r = await heal(s, name);
      assert.ok(r.ok, `${name}: ${JSON.stringify(r)}`);
      assert.equal(r.value.result, Result.HEALED, name);
    }
    // Asked again: a restart's heal re-makes the data path each time (idempotent), asked the same way.
    const again = await heal(s, "pv-pod");
    assert.ok(again.ok && again.value.result === Result.HEALED, JSON.stringify(again));
    assert.deepEqual(publishContextOf(s, "vol-pod"), {});
    assert.deepEqual(publishContextOf(s, "vol-inuse"), {});
    assert.equal(s.kube.counters.get("get", "volumeattachments"), 0, "none: the CSIDriver said there is no attach step before one was needed");
    assert.equal(s.kube.counters.get("get", "csidrivers"), 1, "the CSIDriver read once for three heals");
  });
});

describe("a driver whose CSIDriver says it attaches", () => {
  const stack = stackWith(csiDriver(true));

  test("a volume with its attachment is healed with the attachment's metadata, and the CSIDriver is not read", async () => {
    const s = stack.get();
    s.kube.counters.reset();
    const r = await heal(s, "pv-used");
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(publishContextOf(s, "vol-used"), { portal: "10.0.0.7:3260" });
    assert.equal(s.kube.counters.get("get", "volumeattachments"), 1);
    assert.equal(s.kube.counters.get("get", "csidrivers"), 0, "the attachment answers; the CSIDriver decides only when there is none");
  });

  test("a volume in use here without a VolumeAttachment is not healed (the kubelet would not stage it): FAILED_PRECONDITION naming it, the driver never asked; its health is still checked", async () => {
    const s = stack.get();
    const r = await heal(s, "pv-inuse");
    assert.ok(!r.ok && codeName(r.code) === "FAILED_PRECONDITION", JSON.stringify(r));
    assert.match(
      r.details,
      new RegExp(
        `VolumeAttachment ${vaName("vol-inuse")} of PersistentVolume pv-inuse not found: driver ${DRIVER.replaceAll(".", "\\.")} attaches its volumes`,
      ),
    );
    assert.equal(s.stub.calls({ method: "NodeHealVolume", volumeId: "vol-inuse" }).length, 0);
    const h = await call(s.client, s.client.getVolumeHealth, { pvName: "pv-inuse" });
    assert.ok(h.ok, JSON.stringify(h));
  });

  test("an attached volume is healed with its attachment's metadata as the publish context", async () => {
    const s = stack.get();
    const r = await heal(s, "pv-va");
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(publishContextOf(s, "vol-va"), { portal: "10.0.0.9:3260" });
  });
});

// Step 4 for a driver without attach, as a real cluster shows it: no VolumeAttachment and, since a
// kubelet names only attachable volumes there, nothing in the Node's volumesInUse. A Pod on this
// node that mounts the PV's claim is what says the volume is here (relay/pod-claims.ts): the
// sidecar keeps this node's Pods by a watch, and a Pod elsewhere, a finished Pod or a deleted one
// says nothing. Real processes (driver-stub, sidecar) over the in-memory API.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { call, codeName } from "../../support/grpc.js";
import { waitFor } from "../../support/wait.js";
import { NAMESPACE, pv, userPod } from "../../support/fixtures.js";
import { claimsOfPod } from "../../../common/kube/pod-claims.js";
import { HealVolumeRequest_Mode as Mode, type VolumeHealerClient } from "../../../proto/gen/sidecar/v1/healer.js";
import { NodeHealVolumeResponse_Result as Result, VolumeHealth_State as State } from "../../../proto/gen/healer/v1/healer.js";
import { reasonFor } from "../../support/heal-request.js";

let kube: KubeApi;
let stub: DriverStub;
let sidecar: SidecarProc;
let client: InstanceType<typeof VolumeHealerClient>;

const health = (pvName: string) => call(client, client.getVolumeHealth, { pvName });
const volumes = ["a", "b", "c", "d", "e", "f"];

describe("a volume of a driver without attach, found through a Pod on this node", () => {
  before(async () => {
    kube = await startTestKube([
      ...volumes.map((v) => pv(`pv-${v}`, { handle: `vol-${v}`, claim: `claim-${v}` })),
      userPod("app-a", ["claim-a"]),
      userPod("app-elsewhere", ["claim-b"], { nodeName: "node-2" }),
      userPod("job-done", ["claim-c"], { phase: "Succeeded" }),
      userPod("app-f", ["claim-f"]),
      // A generic ephemeral volume: its claim is named "<pod>-<volume>".
      {
        ...userPod("eph", []),
        spec: {
          nodeName: "node-1",
          containers: [{ name: "app", image: "app:1" }],
          volumes: [{ name: "scratch", ephemeral: { volumeClaimTemplate: { spec: {} } } }],
        },
      },
      pv("pv-eph", { handle: "vol-eph", claim: "eph-scratch" }),
    ]);
    stub = await startDriverStub({
      state: { volumes: Object.fromEntries([...volumes, "eph"].map((v) => [`vol-${v}`, { state: "ABNORMAL", heal: "SUCCEED" }])) },
    });
    sidecar = await startSidecarProc({ driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath });
    await waitHealth(sidecar, "SERVING");
    client = sidecar.healer();
  });

  after(async () => {
    await sidecar?.stop();
    await stub?.stop();
    await kube?.stop();
  });

  test("a running Pod here mounting the claim: checked and healed; its generic ephemeral claim too", async () => {
    const h = await health("pv-a");
    assert.ok(h.ok, JSON.stringify(h));
    assert.equal(h.value.health?.state, State.ABNORMAL);
    const r = await call(client, client.healVolume, { pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) });
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.value.result, Result.HEALED);
    const heal = stub.calls({ method: "NodeHealVolume", volumeId: "vol-a" }).at(-1)!;
    assert.deepEqual((heal.request as { publishContext?: object }).publishContext ?? {}, {}, "no attachment: an empty publish context");
    const e = await health("pv-eph");
    assert.ok(e.ok, JSON.stringify(e));
  });

  test("a Pod on another node, a finished Pod, no Pod, or a PV Released from the claim a Pod here mounts: FAILED_PRECONDITION, the driver never asked", async () => {
    // Released: the claim was deleted and the claimRef kept; a new claim of that name is another PV's.
    const f = kube.get("v1", "PersistentVolume", undefined, "pv-f") as Record<string, unknown>;
    kube.update({ ...f, status: { phase: "Released" } });
    for (const name of ["pv-b", "pv-c", "pv-d", "pv-f"]) {
      const r = await health(name);
      assert.ok(!r.ok && codeName(r.code) === "FAILED_PRECONDITION", `${name}: ${JSON.stringify(r)}`);
      assert.match(r.details, /not in use on node node-1/);
    }
    for (const v of ["b", "c", "d", "f"]) assert.equal(stub.calls({ volumeId: `vol-${v}` }).length, 0, `vol-${v} never reached the driver`);
  });

  test("kept by a watch: a Pod that arrives or leaves changes the answer, with no list per request", async () => {
    await waitFor("the sidecar's watch of this node's Pods", () => kube.counters.get("watch", "pods") >= 1, { timeoutMs: 10_000 });
    const lists = kube.counters.get("list", "pods");
    await kube.create(userPod("app-e", ["claim-e"]));
    await waitFor("pv-e found through the new Pod", async () => (await health("pv-e")).ok, { timeoutMs: 10_000 });
    kube.delete("v1", "Pod", NAMESPACE, "app-a");
    await waitFor(
      "pv-a no longer on this node",
      async () => {
        const r = await health("pv-a");
        return !r.ok && codeName(r.code) === "FAILED_PRECONDITION";
      },
      { timeoutMs: 10_000 },
    );
    for (let i = 0; i < 3; i++) assert.ok((await health("pv-e")).ok);
    assert.equal(kube.counters.get("list", "pods") - lists, 0, "answered from the watch");
  });
});

test("claimsOfPod: claims and generic ephemeral claims of a Pod that has not finished", () => {
  const pod = (phase: string) => ({
    metadata: { name: "web-0", namespace: "shop" },
    spec: { volumes: [{ name: "data", persistentVolumeClaim: { claimName: "data-web-0" } }, { name: "tmp", ephemeral: {} }, { name: "cfg" }] },
    status: { phase },
  });
  for (const phase of ["Pending", "Running", "Unknown"]) assert.deepEqual(claimsOfPod(pod(phase)), ["shop/data-web-0", "shop/web-0-tmp"], phase);
  for (const phase of ["Succeeded", "Failed"]) assert.deepEqual(claimsOfPod(pod(phase)), [], phase);
});

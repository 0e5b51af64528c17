// Health checks answered from the watched PersistentVolume cache cost no API request, a heal only
// the VolumeAttachment read for its publish_context, yet a PV being deleted, or gone, is still
// refused, and without the watch every request reads again. And the cache is node-scoped, so that
// it follows the node's volumes, not the cluster's size: it watches only the PVs it read, each by
// name, never the PV collection. Real sidecar and driver-stub processes, the in-memory API.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { call, codeName } from "../../support/grpc.js";
import { waitFor } from "../../support/wait.js";
import { DRIVER, pv, volumeAttachment } from "../../support/fixtures.js";
import { volumeInUseName } from "../../../sidecar/relay/names.js";
import { HealVolumeRequest_Mode as Mode, type VolumeHealerClient } from "../../../proto/gen/sidecar/v1/healer.js";
import { NodeHealVolumeResponse_Result as Result } from "../../../proto/gen/healer/v1/healer.js";
import { reasonFor } from "../../support/heal-request.js";

const VOLUMES = ["cached", "deleting", "gone", "nowatch", "attached"];

let kube: KubeApi;
let stub: DriverStub;
let sidecar: SidecarProc;
let client: InstanceType<typeof VolumeHealerClient>;

const health = (pvName: string) => call(client, client.getVolumeHealth, { pvName });
const heal = (pvName: string, mode: Mode) => call(client, client.healVolume, { pvName, mode, reason: reasonFor(mode) });
/** PV reads (a watch from resourceVersion 0 reads it too) and VolumeAttachment reads the API server has served so far. */
const reads = () => ({
  pv: kube.counters.get("get", "persistentvolumes") + kube.counters.get("watch", "persistentvolumes"),
  va: kube.counters.get("get", "volumeattachments"),
});
const PV = "v1";
const pvGets = () => kube.counters.get("get", "persistentvolumes");

describe("PersistentVolume cache", () => {
  before(async () => {
    kube = await startTestKube(
      VOLUMES.flatMap((v) => {
        const obj = pv(`pv-${v}`, { handle: `vol-${v}` }) as { metadata: { finalizers?: string[] } };
        // A finalizer keeps the PV "being deleted" (deletionTimestamp set) once it is deleted.
        if (v === "deleting") obj.metadata.finalizers = ["kubernetes.io/pv-protection"];
        return [obj, volumeAttachment(`pv-${v}`, `vol-${v}`)];
      }),
      // As a kubelet reports mounted attachable volumes; pv-attached is left out, so only its
      // VolumeAttachment can show it is on this node.
      { volumesInUse: VOLUMES.filter((v) => v !== "attached").map((v) => volumeInUseName(DRIVER, `vol-${v}`)) },
    );
    stub = await startDriverStub({ dir: tempDir(), state: { volumes: Object.fromEntries(VOLUMES.map((v) => [`vol-${v}`, { state: "HEALTHY" }])) } });
    sidecar = await startSidecarProc({ driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath });
    await waitHealth(sidecar, "SERVING");
    client = sidecar.healer();
  });

  after(async () => {
    await sidecar?.stop();
    await stub?.stop();
    await kube?.stop();
  });

  test("nothing watches or lists the PV collection: one watch per PV read, by its name, none for the PVs never asked about", async () => {
    assert.deepEqual(kube.counters.byName("watch", "persistentvolumes"), {}, "no PV watched before a request named one");
    for (let i = 0; i < 3; i++) assert.ok((await health("pv-nowatch")).ok);
    assert.ok((await health("pv-attached")).ok);
    assert.deepEqual(kube.counters.byName("watch", "persistentvolumes"), { "pv-attached": 1, "pv-nowatch": 1 });
    assert.deepEqual(kube.counters.byName("list", "persistentvolumes"), {});
    // The rest of the cluster's PVs come and go: nothing of it reaches this sidecar.
    await waitFor("both watches to have shown their PV", () => kube.counters.events("persistentvolumes") === 2);
    for (let i = 0; i < 20; i++) await kube.create(pv(`pv-elsewhere-${i}`, { handle: `vol-elsewhere-${i}` }));
    for (let i = 0; i < 20; i++) kube.delete(PV, "PersistentVolume", undefined, `pv-elsewhere-${i}`);
    assert.equal(kube.counters.events("persistentvolumes"), 2, "40 changes of other PVs, no event sent to the sidecar");
  });

  test("a repeated health check and IF_ABNORMAL pass cost no API request; a heal reads only its attachment", async () => {
    const gets = pvGets();
    const first = await health("pv-cached");
    assert.ok(first.ok, `first check: ${!first.ok && codeName(first.code)}`);
    const r0 = reads();
    assert.ok(r0.pv >= 1, "the first check read the PV");
    assert.equal(kube.counters.byName("watch", "persistentvolumes")["pv-cached"], 1, "through its watch");
    assert.equal(pvGets(), gets, "and nothing else");
    const nodeReads = kube.counters.get("get", "nodes");

    for (let i = 0; i < 3; i++) assert.ok((await health("pv-cached")).ok);
    const pass = await heal("pv-cached", Mode.IF_ABNORMAL);
    assert.ok(pass.ok && pass.value.result === Result.NOT_NEEDED, `IF_ABNORMAL on a healthy volume: ${JSON.stringify(pass)}`);
    assert.deepEqual(reads(), r0, "no PV or VolumeAttachment read for repeated checks");
    assert.equal(kube.counters.get("get", "nodes"), nodeReads, "nor of the Node (watched)");
    assert.equal(stub.calls({ method: "NodeGetVolumeHealth", volumeId: "vol-cached" }).length, 5, "every check still reached the driver");

    const healed = await heal("pv-cached", Mode.ALWAYS);
    assert.ok(healed.ok, `heal: ${JSON.stringify(healed)}`);
    assert.deepEqual(reads(), { pv: r0.pv, va: r0.va + 1 }, "a heal takes the watched PV, and reads the VolumeAttachment for publish_context");
  });

  test("whether the volume is on this node is never cached: without the Node's word, every check reads the VolumeAttachment", async () => {
    assert.ok((await health("pv-attached")).ok);
    const r0 = reads();
    for (let i = 0; i < 3; i++) assert.ok((await health("pv-attached")).ok);
    assert.deepEqual(reads(), { pv: r0.pv, va: r0.va + 3 }, "the PV from the cache, the attachment read each time");
    const va = kube
      .list("storage.k8s.io/v1", "VolumeAttachment")
      .find((o) => (o as { spec: { source: { persistentVolumeName?: string } } }).spec.source.persistentVolumeName === "pv-attached")!;
    kube.delete("storage.k8s.io/v1", "VolumeAttachment", undefined, (va as { metadata: { name: string } }).metadata.name);
    const refused = await health("pv-attached");
    assert.ok(!refused.ok && codeName(refused.code) === "FAILED_PRECONDITION", `detached: ${JSON.stringify(refused)}`);
    assert.match(refused.details, /not in use on node/);
  });

  test("a cached PV that starts being deleted is refused (FAILED_PRECONDITION), through the watch", async () => {
    assert.ok((await health("pv-deleting")).ok, "checked (and cached) before the deletion");
    const gets = pvGets();
    kube.delete(PV, "PersistentVolume", undefined, "pv-deleting");
    assert.ok((kube.get(PV, "PersistentVolume", undefined, "pv-deleting") as { metadata: { deletionTimestamp?: string } }).metadata.deletionTimestamp);
    const refused = await waitFor(
      "the health check to be refused",
      async () => {
        const r = await health("pv-deleting");
        return !r.ok && r;
      },
      { timeoutMs: 10_000 },
    );
    assert.equal(codeName(refused.code), "FAILED_PRECONDITION");
    assert.match(refused.details, /being deleted/);
    assert.equal(kube.counters.byName("watch", "persistentvolumes")["pv-deleting"], 1, "the change came on the PV's watch");
    assert.equal(pvGets(), gets, "no read");
    const h = await heal("pv-deleting", Mode.ALWAYS);
    assert.ok(!h.ok && codeName(h.code) === "FAILED_PRECONDITION", "a heal is refused too");
    assert.equal(stub.calls({ method: "NodeHealVolume", volumeId: "vol-deleting" }).length, 0, "the driver never healed it");
  });

  test("a cached PV that is deleted is refused (NOT_FOUND)", async () => {
    assert.ok((await health("pv-gone")).ok, "checked (and cached) before the deletion");
    kube.delete(PV, "PersistentVolume", undefined, "pv-gone");
    const refused = await waitFor(
      "the health check to be refused",
      async () => {
        const r = await health("pv-gone");
        return !r.ok && r;
      },
      { timeoutMs: 10_000 },
    );
    assert.equal(codeName(refused.code), "NOT_FOUND");
  });

  test("while PV watches fail, every check reads the PV again; once they stand, checks cost nothing again", async () => {
    kube.faults.failNext(1_000_000, 500, { verb: "watch", resource: "persistentvolumes" });
    kube.faults.dropWatches();
    // The cached PV's watch ended, so its entry went with it: the first check that reads shows it.
    await waitFor(
      "pv-cached read again",
      async () => {
        const r = pvGets();
        assert.ok((await health("pv-cached")).ok);
        return pvGets() > r;
      },
      { timeoutMs: 10_000 },
    );
    const before = pvGets();
    for (let i = 0; i < 3; i++) assert.ok((await health("pv-nowatch")).ok);
    for (let i = 0; i < 2; i++) assert.ok((await health("pv-cached")).ok);
    assert.equal(pvGets() - before, 5, "one PV read per check");
    assert.ok(
      sidecar.logLines().some((l) => String(l.message).startsWith("PersistentVolume watch ended")),
      "the failed watches were logged",
    );
    kube.faults.clear();
    await waitFor(
      "a check served from the cache again",
      async () => {
        const r = pvGets();
        assert.ok((await health("pv-nowatch")).ok);
        return pvGets() === r;
      },
      { timeoutMs: 15_000 },
    );
  });
});

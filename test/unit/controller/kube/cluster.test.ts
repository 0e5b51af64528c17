// kube/cluster: the ClusterView the controller decides from (DESIGN 7.1), its four informers
// against the in-memory API server: a sidecar's volumes from its node's VolumeAttachments and the
// Node's volumesInUse, and the PV indexes kept right as PVs are deleted and made again.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ClusterCache, toPv } from "../../../../controller/kube/cluster.js";
import { loadKubeConfig } from "../../../../controller/kube/client.js";
import type { SidecarInfo } from "../../../../controller/plan/types.js";
import { createLogger } from "../../../../common/log/logger.js";
import { startKubeApi, type KubeApi } from "../../../kube/server.js";
import { csiNode, G, V, upstreamCrdFile } from "../../../kube/testkit.js";
import { DRIVER, NODE, node, pv, volumeAttachment } from "../../../support/fixtures.js";
import { waitFor } from "../../../support/wait.js";

let api: KubeApi;
let cache: ClusterCache;
const events: [string, SidecarInfo][] = [];

before(async () => {
  const sidecar = csiNode("node-1-csi", "csi", { name: DRIVER, nodeID: NODE, endpoint: "pod://plugin-0.csi:9070" });
  sidecar["metadata"].annotations = { "sidecar.csiaddons.openshift.io/createdByPodUID": "pod-1" };
  api = await startKubeApi({
    crdFiles: [upstreamCrdFile],
    seed: [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "csi" } },
      node([`kubernetes.io/csi/${DRIVER}^handle-pv-inuse`, `kubernetes.io/csi/${DRIVER}^handle-pv-both`, "kubernetes.io/csi/other.csi.example.com^handle-x"]),
      ...["pv-attached", "pv-inuse", "pv-both", "pv-detached", "pv-elsewhere"].map((n) => pv(n)),
      volumeAttachment("pv-attached", "handle-pv-attached"),
      volumeAttachment("pv-both", "handle-pv-both"),
      volumeAttachment("pv-detached", "handle-pv-detached", { attached: false }),
      volumeAttachment("pv-elsewhere", "handle-pv-elsewhere", { nodeName: "node-2" }),
      sidecar,
    ],
  });
  cache = new ClusterCache(loadKubeConfig(api.kubeconfigPath), undefined, createLogger("error", "json"));
  cache.on("sidecar", (type, s) => void events.push([type, s]));
  await cache.start();
});

after(async () => {
  cache?.stop();
  await api?.stop();
});

const KEY = "csi/node-1-csi";
const names = (s: SidecarInfo) =>
  cache
    .volumesOf(s)
    .map((p) => p.name)
    .sort();

test("a CSIAddonsNode as the controller sees it", () => {
  const s = cache.sidecar(KEY);
  assert.deepEqual(
    { ...s, uid: "" },
    {
      key: KEY,
      namespace: "csi",
      name: "node-1-csi",
      uid: "",
      driver: DRIVER,
      endpoint: "pod://plugin-0.csi:9070",
      nodeId: NODE,
      annotations: { "sidecar.csiaddons.openshift.io/createdByPodUID": "pod-1" },
      owners: [],
      deleting: false,
    },
  );
  assert.ok(s?.uid);
  assert.deepEqual(
    cache.sidecars().map((x) => x.key),
    [KEY],
  );
  assert.equal(cache.sidecar("csi/none"), undefined);
});

test("its volumes: attached on its node, or in use there per the Node; once each; not detached, not elsewhere, not another driver's", () => {
  assert.deepEqual(names(cache.sidecar(KEY)!), ["pv-attached", "pv-both", "pv-inuse"]);
});

test("a PV deleted leaves both indexes; made again with another handle, it is found by the new one only", async () => {
  const s = cache.sidecar(KEY)!;
  api.delete("v1", "PersistentVolume", undefined, "pv-inuse");
  await waitFor("the deletion seen", () => cache.pv("pv-inuse") === undefined);
  assert.deepEqual(names(s), ["pv-attached", "pv-both"]);

  api.delete("v1", "PersistentVolume", undefined, "pv-attached");
  await waitFor("the deletion seen", () => cache.pv("pv-attached") === undefined);
  assert.deepEqual(names(s), ["pv-both"], "its VolumeAttachment, still there, names a PV that is gone");

  await api.create(pv("pv-inuse", { handle: "handle-new" }));
  await waitFor("the new PV seen", () => cache.pv("pv-inuse")?.handle === "handle-new");
  assert.deepEqual(names(s), ["pv-both"], "the Node lists the old handle, which no PV has now");
});

test("two PVs naming one handle in use: deleting one leaves the other found, whichever changed last", async () => {
  const s = cache.sidecar(KEY)!;
  const inUse = `kubernetes.io/csi/${DRIVER}^handle-shared`;
  const n = api.get("v1", "Node", undefined, NODE) as Record<string, any>;
  n["status"].volumesInUse = [...n["status"].volumesInUse, inUse];
  api.update(n);
  await api.create(pv("pv-shared-a", { handle: "handle-shared" }));
  await api.create(pv("pv-shared-b", { handle: "handle-shared" }));
  await waitFor("both PVs seen", () => names(s).includes("pv-shared-a") && names(s).includes("pv-shared-b"));

  api.delete("v1", "PersistentVolume", undefined, "pv-shared-b");
  await waitFor("the deletion seen", () => cache.pv("pv-shared-b") === undefined);
  assert.ok(names(s).includes("pv-shared-a"), "the PV left still names the handle the Node uses");

  // The one made later is the one whose event came last: deleting the earlier must not drop it.
  await api.create(pv("pv-shared-c", { handle: "handle-shared" }));
  await waitFor("the new PV seen", () => cache.pv("pv-shared-c") !== undefined);
  api.delete("v1", "PersistentVolume", undefined, "pv-shared-a");
  await waitFor("the deletion seen", () => cache.pv("pv-shared-a") === undefined);
  assert.deepEqual(
    names(s).filter((x) => x.startsWith("pv-shared")),
    ["pv-shared-c"],
  );
  api.delete("v1", "PersistentVolume", undefined, "pv-shared-c");
  await waitFor("the deletion seen", () => cache.pv("pv-shared-c") === undefined);
  assert.deepEqual(
    names(s).filter((x) => x.startsWith("pv-shared")),
    [],
  );
});

test("the volumes of claims its node's Pods mount: bound PVs of its driver, not attached ones, not deleted, following rebinding", async () => {
  const s = cache.sidecar(KEY)!;
  const claims = ["csi/claim-1", "csi/claim-2", "csi/claim-3", "csi/claim-4", "shop/claim-1"];
  await api.create(pv("pv-claim-1", { handle: "handle-c1", claim: "claim-1" }));
  // Attached to this node: its VolumeAttachment answers for it, attached or not.
  await api.create(pv("pv-claim-2", { handle: "handle-c2", claim: "claim-2" }));
  await api.create(volumeAttachment("pv-claim-2", "handle-c2", { attached: false }));
  await api.create(pv("pv-claim-3", { handle: "handle-c3", claim: "claim-3", driver: "other.csi.example.com" }));
  await api.create(pv("pv-shop", { handle: "handle-shop", claim: "shop/claim-1" }));
  const of = (c: string[]) =>
    cache
      .volumesOfClaims(s, c)
      .map((p) => p.name)
      .sort();
  await waitFor("the PVs seen", () => cache.pv("pv-shop") !== undefined && cache.pv("pv-claim-3") !== undefined);
  await waitFor("the attachment seen", () => of(claims).length === 2);
  assert.deepEqual(of(claims), ["pv-claim-1", "pv-shop"]);
  assert.deepEqual(of(["csi/claim-1"]), ["pv-claim-1"]);
  assert.deepEqual(of([]), []);

  // Bound again to another claim: found by the new one only.
  const o = api.get("v1", "PersistentVolume", undefined, "pv-claim-1") as Record<string, any>;
  o["spec"].claimRef = { ...o["spec"].claimRef, name: "claim-4", uid: "uid-claim-4" };
  api.update(o);
  await waitFor("the rebinding seen", () => cache.pv("pv-claim-1")?.claim?.name === "claim-4");
  assert.deepEqual(of(["csi/claim-1"]), []);
  assert.deepEqual(of(["csi/claim-4"]), ["pv-claim-1"]);

  api.delete("v1", "PersistentVolume", undefined, "pv-shop");
  await waitFor("the deletion seen", () => cache.pv("pv-shop") === undefined);
  assert.deepEqual(of(claims), ["pv-claim-1"]);

  // Released (its claim deleted): the claimRef stays, and a new claim of that name is another PV's.
  const released = api.get("v1", "PersistentVolume", undefined, "pv-claim-1") as Record<string, any>;
  api.update({ ...released, status: { phase: "Released" } });
  await waitFor("the release seen", () => of(["csi/claim-4"]).length === 0);
  const bound = api.get("v1", "PersistentVolume", undefined, "pv-claim-1") as Record<string, any>;
  api.update({ ...bound, status: { phase: "Bound" } });
  await waitFor("bound again", () => of(["csi/claim-4"]).length === 1);
});

test("changes of a CSIAddonsNode are told to the controller as they come", async () => {
  const stored = api.get(`${G}/${V}`, "CSIAddonsNode", "csi", "node-1-csi") as Record<string, any>;
  stored["metadata"].annotations["sidecar.csiaddons.openshift.io/driverRestartedAt"] = "2026-12-03T06:00:00Z";
  api.update(stored);
  await waitFor("the update told", () =>
    events.some(([type, s]) => type === "update" && s.annotations["sidecar.csiaddons.openshift.io/driverRestartedAt"] === "2026-12-03T06:00:00Z"),
  );
  assert.equal(cache.sidecar(KEY)?.annotations["sidecar.csiaddons.openshift.io/driverRestartedAt"], "2026-12-03T06:00:00Z");
  api.delete(`${G}/${V}`, "CSIAddonsNode", "csi", "node-1-csi");
  await waitFor("the deletion told", () => events.some(([type]) => type === "delete"));
  assert.equal(cache.sidecar(KEY), undefined);
});

test("a PV that is not CSI (in-tree, hostPath, NFS) is no volume of any sidecar", () => {
  assert.equal(toPv({ metadata: { name: "pv-nfs" }, spec: { nfs: { server: "nfs.example.com", path: "/x" } } } as never), undefined);
  assert.equal(toPv({ metadata: {}, spec: { csi: { driver: DRIVER, volumeHandle: "h" } } } as never), undefined);
  assert.equal(toPv({ metadata: { name: "pv-c" }, spec: { csi: { driver: DRIVER, volumeHandle: "h" } } } as never)?.handle, "h");
});

test("start() resolves once the VolumeAttachments, PVs and Nodes are listed, however slowly, so the first CSIAddonsNode events see complete indexes", async (t) => {
  const slow = await startKubeApi({
    crdFiles: [upstreamCrdFile],
    seed: [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "csi" } },
      node([]),
      pv("pv-attached"),
      volumeAttachment("pv-attached", "handle-pv-attached"),
      csiNode("node-1-csi", "csi", { name: DRIVER, nodeID: NODE, endpoint: "pod://plugin-0.csi:9070" }),
    ],
  });
  t.after(() => slow.stop());
  // The PVs and VolumeAttachments answer 300 ms late; the CSIAddonsNodes at once.
  slow.faults.latency(300, { verb: "list", resource: "persistentvolumes" });
  slow.faults.latency(300, { verb: "list", resource: "volumeattachments" });
  const c = new ClusterCache(loadKubeConfig(slow.kubeconfigPath), undefined, createLogger("error", "json"));
  t.after(() => c.stop());
  await c.start();
  assert.deepEqual(
    c.volumesOf(c.sidecar(KEY)!).map((p) => p.name),
    ["pv-attached"],
  );
});

// kube/: what the informers hold. Lists come in pages of 500, each page cut down before the next
// is asked for, and the cache keeps of a PV, a VolumeAttachment and a Node only what the
// controller reads: a large cluster's objects (managedFields, last-applied annotations, a
// Node's images) are never all in memory at once, and none of them stays.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { type KubernetesListObject, type V1Node, type V1PersistentVolume, type V1VolumeAttachment } from "@kubernetes/client-node";
import { loadKubeConfig } from "../../../../controller/kube/client.js";
import { pvInformer, toAttachment, toPv } from "../../../../controller/kube/cluster.js";
import { PAGE_SIZE, listInPages } from "../../../../controller/kube/paged-list.js";
import { slimAttachment, slimNode, slimPv } from "../../../../controller/kube/slim.js";
import { createLogger } from "../../../../common/log/logger.js";
import { startKubeApi, type KubeApi } from "../../../kube/server.js";
import { pv, volumeAttachment } from "../../../support/fixtures.js";
import { waitFor } from "../../../support/wait.js";

/** A PV as a provisioner, kubectl and the API server leave it: most of it is of no use to the controller. */
function fullPv(name: string): V1PersistentVolume {
  const o = pv(name, {
    handle: `handle-${name}`,
    attributes: { clusterID: "ceph-1", pool: "rbd", imageName: `csi-vol-${name}`, imageFeatures: "layering" },
  }) as unknown as V1PersistentVolume;
  o.metadata = {
    ...o.metadata,
    uid: `uid-${name}`,
    resourceVersion: "7",
    deletionTimestamp: new Date(0),
    annotations: { "pv.kubernetes.io/provisioned-by": "rbd.csi.ceph.com", "kubectl.kubernetes.io/last-applied-configuration": JSON.stringify(o).repeat(3) },
    managedFields: [{ manager: "csi-provisioner", operation: "Update", apiVersion: "v1", fieldsType: "FieldsV1", fieldsV1: { "f:spec": { "f:csi": {} } } }],
  };
  o.spec!.claimRef = { kind: "PersistentVolumeClaim", namespace: "apps", name: `claim-${name}`, uid: `claim-uid-${name}` };
  return o;
}

test("slim objects: what the controller derives from them is unchanged, and everything else is gone", () => {
  const p = fullPv("pv-1");
  assert.deepEqual(toPv(slimPv(p)), toPv(p));
  assert.equal(slimPv(p).metadata?.resourceVersion, "7", "the cache compares resourceVersions after a relist");
  const va = volumeAttachment("pv-1", "handle-pv-1") as unknown as V1VolumeAttachment;
  va.status = { attached: true, attachmentMetadata: { device: "/dev/rbd0" } };
  assert.deepEqual(toAttachment(slimAttachment(va)), toAttachment(va));
  const node: V1Node = {
    metadata: { name: "n1", resourceVersion: "9" },
    status: {
      volumesInUse: ["kubernetes.io/csi/drv^h1"],
      images: [{ names: ["registry/app:1"], sizeBytes: 1 }],
      conditions: [{ type: "Ready", status: "True" }],
    },
  };
  assert.deepEqual(slimNode(node), {
    metadata: { name: "n1", namespace: undefined, uid: undefined, resourceVersion: "9" },
    status: { volumesInUse: ["kubernetes.io/csi/drv^h1"] },
  });
  const json = JSON.stringify(slimPv(p));
  for (const gone of ["managedFields", "annotations", "volumeAttributes", "capacity", "accessModes"]) assert.equal(json.includes(gone), false, gone);
});

test("listInPages: asks page after page with the continue token, and transforms each page before asking for the next", async () => {
  const log: string[] = [];
  const pages = [["a", "b"], ["c", "d"], ["e"]];
  const list = async ({ limit, _continue }: { limit: number; _continue?: string }): Promise<KubernetesListObject<V1Node>> => {
    const i = _continue === undefined ? 0 : Number(_continue);
    log.push(`page ${i} limit ${limit}`);
    const more = i + 1 < pages.length;
    return {
      apiVersion: "v1",
      kind: "NodeList",
      metadata: { resourceVersion: "42", ...(more ? { _continue: String(i + 1) } : {}) },
      items: pages[i]!.map((name) => ({ metadata: { name } })),
    };
  };
  const got = await listInPages(
    list,
    AbortSignal.timeout(5_000),
    (o) => (log.push(`transform ${o.metadata!.name}`), { metadata: { name: o.metadata!.name!.toUpperCase() } }),
    2,
  );
  assert.deepEqual(
    got.items.map((o) => o.metadata!.name),
    ["A", "B", "C", "D", "E"],
  );
  assert.equal(got.metadata?.resourceVersion, "42");
  assert.deepEqual(log, ["page 0 limit 2", "transform a", "transform b", "page 1 limit 2", "transform c", "transform d", "page 2 limit 2", "transform e"]);

  // Custom objects come as plain JSON: their token is metadata.continue.
  const plain = async ({ _continue }: { limit: number; _continue?: string }) =>
    (_continue
      ? { metadata: { resourceVersion: "5" }, items: [{ metadata: { name: "y" } }] }
      : { metadata: { resourceVersion: "5", continue: "t" }, items: [{ metadata: { name: "x" } }] }) as unknown as KubernetesListObject<V1Node>;
  assert.deepEqual(
    (await listInPages(plain, AbortSignal.timeout(5_000))).items.map((o) => o.metadata!.name),
    ["x", "y"],
  );
});

let api: KubeApi;
before(async () => {
  api = await startKubeApi({
    seed: Array.from({ length: 1200 }, (_, i) => fullPv(`pv-${String(i).padStart(4, "0")}`)).map((o) => ({
      ...o,
      metadata: { name: o.metadata!.name, annotations: o.metadata!.annotations },
    })),
  });
});
after(async () => {
  await api?.stop();
});

/** The controller's own PV informer (cluster.ts) against the in-memory API. */
const pvInformerOfApi = () => pvInformer(loadKubeConfig(api.kubeconfigPath), createLogger("error", "json"));

test("an informer lists the API in pages and keeps, of listed and watched objects alike, only the slim object", async () => {
  api.counters.reset();
  const inf = pvInformerOfApi();
  const seen: V1PersistentVolume[] = [];
  inf.on("change", (_type, o) => seen.push(o));
  try {
    await inf.start();
    assert.equal(inf.list().length, 1200);
    assert.equal(api.counters.get("list", "persistentvolumes"), Math.ceil(1200 / PAGE_SIZE), "one request per page of 500");
    const isSlim = (o: V1PersistentVolume | undefined) =>
      o !== undefined && o.metadata?.annotations === undefined && o.spec?.capacity === undefined && o.spec?.csi?.volumeAttributes === undefined;
    assert.ok(inf.list().every(isSlim), "listed objects are cached slim");
    assert.ok(seen.length === 1200 && seen.every(isSlim), "and handed on slim");
    assert.equal(toPv(inf.get("pv-0007")!)?.handle, "handle-pv-0007");

    await api.create(fullPv("pv-new"));
    await waitFor("the watched PV", () => inf.get("pv-new") !== undefined);
    assert.ok(isSlim(inf.get("pv-new")) && isSlim(seen.at(-1)), "a watched object is cached and handed on slim too");
    assert.deepEqual(toPv(inf.get("pv-new")!), { ...toPv(fullPv("pv-new"))!, uid: inf.get("pv-new")!.metadata!.uid!, deleting: false });

    // A modification is an event of its own (MODIFIED), and what it brings is as large as the object.
    const stored = api.get("v1", "PersistentVolume", undefined, "pv-new") as V1PersistentVolume;
    const changed = api.update({
      ...stored,
      metadata: { ...stored.metadata, annotations: { ...stored.metadata?.annotations, "example.com/note": "x".repeat(4096) } },
    }) as V1PersistentVolume;
    await waitFor("the modified PV", () => inf.get("pv-new")?.metadata?.resourceVersion === changed.metadata?.resourceVersion);
    assert.ok(isSlim(inf.get("pv-new")) && isSlim(seen.at(-1)), "a modified object is cached and handed on slim too");
  } finally {
    inf.stop();
  }
});

test("an informer stopped while a list page hangs ends that request at once, as the request deadline would", async () => {
  api.counters.reset();
  api.faults.latency(60_000, { verb: "list", resource: "persistentvolumes" });
  const inf = pvInformerOfApi();
  try {
    const started = inf.start();
    await waitFor("the list request at the API", () => api.counters.get("list", "persistentvolumes") > 0);
    const t0 = Date.now();
    inf.stop();
    await started;
    assert.ok(
      Date.now() - t0 < 5_000,
      `the hanging page ended ${Date.now() - t0} ms after stop() (its request deadline is 15 s, the API would answer after 60 s)`,
    );
  } finally {
    api.faults.clear();
    inf.stop();
  }
});

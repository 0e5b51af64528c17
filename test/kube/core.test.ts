// Built-in resources the sidecar reads or writes, through their typed client-node APIs: nodes
// (status in the object), persistentvolumes, volumeattachments (status only via /status), secrets
// (stringData), events, pods (schema-validated), apps owners, leases and namespaces.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type Clients, kubeSuite, failure, strategicPatch } from "./testkit.js";

let c: Clients;
kubeSuite(
  {
    seed: [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "csi" } },
      { apiVersion: "v1", kind: "Node", metadata: { name: "node-1" }, status: { volumesInUse: ["kubernetes.io/csi/drv^vol-1"] } },
    ],
  },
  async (k) => {
    ({ c } = k);
  },
);

describe("core and storage resources", () => {
  test("a Node's status (volumesInUse) is part of the object; PUT of the node keeps it", async () => {
    const n = await c.core.readNode({ name: "node-1" });
    assert.deepEqual(n.status?.volumesInUse, ["kubernetes.io/csi/drv^vol-1"]);
    const updated = await c.core.replaceNode({
      name: "node-1",
      body: { ...n, metadata: { ...n.metadata, labels: { zone: "a" } }, status: { volumesInUse: [] } },
    });
    assert.deepEqual(updated.status?.volumesInUse, ["kubernetes.io/csi/drv^vol-1"]);
    const viaStatus = await c.core.replaceNodeStatus({ name: "node-1", body: { ...updated, status: { volumesInUse: ["kubernetes.io/csi/drv^vol-2"] } } });
    assert.deepEqual(viaStatus.status?.volumesInUse, ["kubernetes.io/csi/drv^vol-2"]);
  });

  test("VolumeAttachment: create drops status; /status sets attached and attachmentMetadata", async () => {
    const va = await c.storage.createVolumeAttachment({
      body: {
        metadata: { name: "csi-abc" },
        spec: { attacher: "drv", nodeName: "node-1", source: { persistentVolumeName: "pv-1" } },
        status: { attached: true },
      },
    });
    assert.equal(va.status, undefined);
    const attached = await c.storage.replaceVolumeAttachmentStatus({
      name: "csi-abc",
      body: { ...va, status: { attached: true, attachmentMetadata: { dev: "/dev/nbd0" } } },
    });
    assert.equal(attached.status?.attached, true);
    assert.deepEqual((await c.storage.readVolumeAttachment({ name: "csi-abc" })).status?.attachmentMetadata, { dev: "/dev/nbd0" });
  });

  test("CSIDriver: the API server's spec defaults (attachRequired true when unset), an explicit false kept; a wrong type → 422", async () => {
    const made = await c.storage.createCSIDriver({ body: { metadata: { name: "attach.example.com" }, spec: {} } });
    assert.equal(made.spec.attachRequired, true);
    assert.equal(made.spec.podInfoOnMount, false);
    assert.deepEqual(made.spec.volumeLifecycleModes, ["Persistent"]);
    await c.storage.createCSIDriver({ body: { metadata: { name: "noattach.example.com" }, spec: { attachRequired: false } } });
    assert.equal((await c.storage.readCSIDriver({ name: "noattach.example.com" })).spec.attachRequired, false);
    const f = await failure(c.storage.createCSIDriver({ body: { metadata: { name: "bad.example.com" }, spec: { attachRequired: "no" } } as any }));
    assert.equal(f.code, 422);
  });

  test("PersistentVolume round trip; a PV whose csi block lacks volumeHandle → 422", async () => {
    const body = {
      metadata: { name: "pv-1" },
      spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], csi: { driver: "drv", volumeHandle: "vol-1" } },
    };
    await c.core.createPersistentVolume({ body });
    assert.equal((await c.core.readPersistentVolume({ name: "pv-1" })).spec?.csi?.volumeHandle, "vol-1");
    const f = await failure(c.core.createPersistentVolume({ body: { metadata: { name: "pv-2" }, spec: { csi: { driver: "drv" } } } as any }));
    assert.equal(f.code, 422);
    assert.deepEqual(
      f.status.details?.causes?.map((x) => [x.reason, x.field]),
      [["FieldValueRequired", "spec.csi.volumeHandle"]],
    );
    assert.equal(f.status.details?.kind, "PersistentVolume");
  });

  test("Secret stringData is merged into base64 data", async () => {
    const s = await c.core.createNamespacedSecret({ namespace: "csi", body: { metadata: { name: "stage" }, stringData: { userKey: "s3cret" } } });
    assert.deepEqual(s.data, { userKey: Buffer.from("s3cret").toString("base64") });
    assert.equal(s.stringData, undefined);
    assert.equal(s.type, "Opaque");
  });

  test("Events can be created; a Pod without containers → 422", async () => {
    const ev = await c.core.createNamespacedEvent({
      namespace: "csi",
      body: { metadata: { name: "pv-1.1234" }, involvedObject: { kind: "PersistentVolume", name: "pv-1" }, reason: "Healed", message: "ok", type: "Normal" },
    });
    assert.equal(ev.reason, "Healed");
    const f = await failure(c.core.createNamespacedPod({ namespace: "csi", body: { metadata: { name: "p" }, spec: {} as any } }));
    assert.equal(f.code, 422);
    assert.equal(f.status.details?.causes?.[0]?.field, "spec.containers");
  });

  test("a Pod's ReplicaSet owner resolves to its Deployment through AppsV1Api", async () => {
    const labels = { app: "x" };
    const template = { metadata: { labels }, spec: { containers: [{ name: "c", image: "i" }] } };
    const d = await c.apps.createNamespacedDeployment({
      namespace: "csi",
      body: { metadata: { name: "ctrl" }, spec: { selector: { matchLabels: labels }, template } },
    });
    assert.equal(d.metadata?.generation, 1);
    const rs = await c.apps.createNamespacedReplicaSet({
      namespace: "csi",
      body: {
        metadata: { name: "ctrl-5d9", ownerReferences: [{ apiVersion: "apps/v1", kind: "Deployment", name: "ctrl", uid: d.metadata!.uid!, controller: true }] },
        spec: { selector: { matchLabels: labels }, template },
      },
    });
    const owner = (await c.apps.readNamespacedReplicaSet({ namespace: "csi", name: rs.metadata!.name! })).metadata!.ownerReferences![0]!;
    assert.equal((await c.apps.readNamespacedDeployment({ namespace: "csi", name: owner.name })).metadata?.uid, d.metadata?.uid);
  });

  test("strategic merge patch is accepted for built-in kinds", async () => {
    const n = await c.core.patchNode({ name: "node-1", body: { metadata: { labels: { zone: "b" } } } }, strategicPatch);
    assert.equal(n.metadata?.labels?.zone, "b");
  });

  test("Leases: create, then update with a stale resourceVersion → 409", async () => {
    const l = await c.coordination.createNamespacedLease({ namespace: "csi", body: { metadata: { name: "lock" }, spec: { holderIdentity: "a" } } });
    await c.coordination.replaceNamespacedLease({ namespace: "csi", name: "lock", body: { ...l, spec: { holderIdentity: "b" } } });
    const f = await failure(c.coordination.replaceNamespacedLease({ namespace: "csi", name: "lock", body: { ...l, spec: { holderIdentity: "c" } } }));
    assert.equal(f.code, 409);
    assert.equal(
      f.status.message,
      'Operation cannot be fulfilled on leases.coordination.k8s.io "lock": the object has been modified; please apply your changes to the latest version and try again',
    );
  });

  test("deleting a namespace removes what is in it; creating in a terminating one is refused", async () => {
    await c.core.createNamespace({ body: { metadata: { name: "tmp" } } });
    await c.core.createNamespacedSecret({ namespace: "tmp", body: { metadata: { name: "keep", finalizers: ["example.com/hold"] } } });
    const marked = await c.core.deleteNamespace({ name: "tmp" });
    assert.equal((marked as any).status?.phase, "Terminating");
    const f = await failure(c.core.createNamespacedSecret({ namespace: "tmp", body: { metadata: { name: "new" } } }));
    assert.equal(f.code, 403);
    assert.match(f.status.message!, /unable to create new content in namespace tmp because it is being terminated/);
    const held = await c.core.readNamespacedSecret({ namespace: "tmp", name: "keep" });
    await c.core.replaceNamespacedSecret({ namespace: "tmp", name: "keep", body: { ...held, metadata: { ...held.metadata, finalizers: [] } } });
    assert.equal((await failure(c.core.readNamespace({ name: "tmp" }))).code, 404);
  });
});

// kube/attachment-index: VolumeAttachments by node, kept right through updates and deletes that
// name only the object.
import { test } from "node:test";
import assert from "node:assert/strict";
import { AttachmentIndex } from "../../../../controller/kube/attachment-index.js";

const va = (pvName: string, nodeName: string, attached = true) => ({ attacher: "drv", nodeName, pvName, attached });
const pvsOn = (idx: AttachmentIndex, node: string) =>
  idx
    .onNode(node)
    .map((a) => `${a.pvName}:${a.attached}`)
    .sort();

test("attachment index: an update replaces the entry, a delete removes it, and a name seen again on another node moves there", () => {
  const idx = new AttachmentIndex();
  idx.set("csi-a", va("pv-a", "n1", false));
  idx.set("csi-b", va("pv-b", "n1"));
  idx.set("csi-c", va("pv-c", "n2"));
  idx.set("csi-a", va("pv-a", "n1"));
  assert.deepEqual(pvsOn(idx, "n1"), ["pv-a:true", "pv-b:true"], "the update replaced csi-a, not added a second entry");
  idx.delete("csi-b");
  idx.delete("csi-unknown");
  assert.deepEqual(pvsOn(idx, "n1"), ["pv-a:true"]);
  idx.set("csi-a", va("pv-a", "n2"));
  assert.deepEqual(pvsOn(idx, "n1"), [], "no stale entry left under the old node");
  assert.deepEqual(pvsOn(idx, "n2"), ["pv-a:true", "pv-c:true"]);
  assert.deepEqual(pvsOn(idx, "n3"), []);
});

test("attachment index: the last attachment of a node deleted, then the name made again on another node, or deleted twice (a relist after a missed event)", () => {
  const idx = new AttachmentIndex();
  idx.set("csi-a", va("pv-a", "n1"));
  idx.delete("csi-a");
  idx.delete("csi-a");
  assert.deepEqual(pvsOn(idx, "n1"), []);
  idx.set("csi-a", va("pv-a", "n2"));
  assert.deepEqual(pvsOn(idx, "n2"), ["pv-a:true"]);
  assert.deepEqual(pvsOn(idx, "n1"), []);
});

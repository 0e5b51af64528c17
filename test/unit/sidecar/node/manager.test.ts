// node/manager: the sidecar's CSIAddonsNode kept in place (DESIGN 4.3), in process against the
// in-memory API (real 409s, finalizers, watches), with every KubeApi call timed: what it writes
// once placed, how it waits out a deletion, how it backs off and starts over, how many loops run.
// lifecycle.test.ts shows the same behaviour through a whole sidecar process.
// unit tier: own process (its tests wait out the manager's real backoffs, about 25 s in all).
import { test } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi } from "../../../../sidecar/kube/api.js";
import { csiNode } from "../../../kube/testkit.js";
import { waitFor } from "../../../support/wait.js";
import { CSI_ADDONS_NODE_NAME, DAEMONSET, DRIVER, NAMESPACE, NODE, POD, daemonSet, pod } from "../../../support/fixtures.js";
import { CAN, ENDPOINT, api, manager, placed, real, stored, useNodeManagerHarness } from "../../../support/node-manager.js";

type Obj = Record<string, any>;

useNodeManagerHarness();

/** A CSIAddonsNode with our spec under our name, as one left by an earlier pod (no owner reference). */
const ours = () => csiNode(CSI_ADDONS_NODE_NAME, NAMESPACE, { name: DRIVER, endpoint: ENDPOINT, nodeID: NODE });

/** Our object, deleted while a finalizer holds it: it stays with a deletionTimestamp. */
async function pendingDeletion(): Promise<void> {
  const held = ours();
  await api.create({ ...held, metadata: { ...held["metadata"], finalizers: ["csiaddons.openshift.io/node"] } });
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
}

test("placed and left alone: no write while nothing changes, however often the API confirms it; the one create logged", async () => {
  const { m, lines, callsOf } = manager(300);
  m.setDriver(DRIVER);
  await placed(m);
  const rv = stored()!.metadata.resourceVersion;
  // The periodic check re-reads the object every 100 ms; three of them, and still the one create.
  const reads = callsOf("getCSIAddonsNode").length;
  await waitFor("three periodic checks", () => callsOf("getCSIAddonsNode").length >= reads + 3);
  assert.equal(callsOf("createCSIAddonsNode").length, 1);
  assert.equal(callsOf("replaceCSIAddonsNode").length, 0);
  assert.equal(stored()!.metadata.resourceVersion, rv);
  assert.ok(m.presence.condition.ok);
  const writes = lines.filter((l) => /^(created|updated) CSIAddonsNode$/.test(String(l["message"])));
  assert.deepEqual(
    writes.map((l) => [l["level"], l["message"], l["name"], l["namespace"]]),
    [["info", "created CSIAddonsNode", CSI_ADDONS_NODE_NAME, NAMESPACE]],
  );
});

test("its loops started once however often the driver connects before the object is placed (the Pod read once, one watch)", async () => {
  const { m, callsOf } = manager();
  m.setDriver(DRIVER);
  m.setDriver(DRIVER);
  m.setDriver(DRIVER);
  await placed(m);
  await waitFor("the watch on the object", () => callsOf("watchCSIAddonsNode").length >= 1);
  assert.equal(callsOf("getPod").length, 1, "the Pod's owner read once");
  assert.equal(callsOf("createCSIAddonsNode").length, 1);
  assert.equal(callsOf("watchCSIAddonsNode").length, 1);
});

test("an object found being deleted at start is polled with a growing wait until it is gone, then created anew", async () => {
  await pendingDeletion();
  const old = stored()!;
  assert.ok(old.metadata.deletionTimestamp);
  // A periodic check every 20 s: only the reconcile's own polling can notice the deletion end in time.
  const { m, lines, callsOf } = manager();
  m.setDriver(DRIVER);
  await waitFor("four reads of the object", () => callsOf("getCSIAddonsNode").length >= 4);
  const reads = callsOf("getCSIAddonsNode").map((c) => c.at);
  // Waits of 200, 400 and 800 ms between them (a timer fires no earlier than asked).
  assert.ok(reads[3]! - reads[0]! >= 1_400, `the reads came ${reads[3]! - reads[0]!} ms apart, not after backoff`);
  assert.equal(m.presence.condition.ok, false);
  assert.match(m.presence.condition.reason, /being deleted/);
  assert.ok(lines.some((l) => l["message"] === "CSIAddonsNode is being deleted; waiting until it is gone"));

  api.update({ ...old, metadata: { ...old.metadata, finalizers: [] } });
  await placed(m);
  const now = stored()!;
  assert.notEqual(now.metadata.uid, old.metadata.uid);
  assert.equal(now.metadata.deletionTimestamp, undefined);
});

test("the backoff starts over after a success: a failure after a long outage is retried soon", async () => {
  // Four failed reads (waits of 200, 400, 800, 1600 ms), then the object placed.
  api.faults.failNext(4, 500, { verb: "get", resource: "csiaddonsnodes" });
  const { m, callsOf } = manager();
  m.setDriver(DRIVER);
  await placed(m);
  assert.equal(callsOf("getCSIAddonsNode").length, 5);

  // Deleted: the watch starts a reconcile whose first read fails once more.
  api.faults.failNext(1, 500, { verb: "get", resource: "csiaddonsnodes" });
  const uid = stored()!.metadata.uid;
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await waitFor("created anew", () => stored() && stored()!.metadata.uid !== uid);
  const reads = callsOf("getCSIAddonsNode").map((c) => c.at);
  assert.equal(reads.length, 7);
  const gap = reads[6]! - reads[5]!;
  // 200 ms after a reset; without it, 3200 ms.
  assert.ok(gap < 2_000, `retried ${gap} ms after the failure`);
});

test("recreated after a deletion under the owner the Pod has now: a DaemonSet made again under the same name (new uid) while the pod lived on", async () => {
  const { m, callsOf } = manager();
  m.setDriver(DRIVER);
  await placed(m);
  const first = stored()!;
  const ds = () => api.get("apps/v1", "DaemonSet", NAMESPACE, DAEMONSET) as Obj;
  const oldUid = ds().metadata.uid;
  assert.deepEqual(
    first.metadata.ownerReferences.map((o: Obj) => o.uid),
    [oldUid],
  );

  // The DaemonSet deleted with --cascade=orphan and made again: same name, new uid; its pods adopted.
  api.delete("apps/v1", "DaemonSet", NAMESPACE, DAEMONSET);
  const newUid = "5f0c7c1e-1111-4a4a-9d9d-00000000000f";
  await api.create({ ...daemonSet(), metadata: { ...(daemonSet()["metadata"] as Obj), uid: newUid } });
  assert.notEqual(newUid, oldUid);
  const p = api.get("v1", "Pod", NAMESPACE, POD) as Obj;
  const ref = (pod()["metadata"] as Obj)["ownerReferences"][0] as Obj;
  api.update({ ...p, metadata: { ...p.metadata, ownerReferences: [{ ...ref, uid: newUid }] } });
  // The garbage collector then deletes the CSIAddonsNode owned by the old uid.
  const reads = callsOf("getCSIAddonsNode").length;
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);

  const again = await waitFor("recreated", () => (stored() && stored()!.metadata.uid !== first.metadata.uid ? stored() : undefined));
  // Read before creating: with the old uid the garbage collector would delete it again.
  assert.deepEqual(
    again.metadata.ownerReferences.map((o: Obj) => o.uid),
    [newUid],
  );
  // The new owner keeps the object's name: made at once, without reading the object again first.
  assert.equal(callsOf("getCSIAddonsNode").length, reads + 1);
});

test("adopted by a DaemonSet of another name after a deletion: made at once under the name of the owner the Pod has now, not at the next periodic check, and watched under that name", async () => {
  // The periodic check every 40 s: only the reconcile itself can make the object in time.
  const { m, lines } = manager(120_000);
  m.setDriver(DRIVER);
  await placed(m);
  const p = api.get("v1", "Pod", NAMESPACE, POD) as Obj;
  const renamed = `${DAEMONSET}-v2`;
  const newName = `${NODE}-${NAMESPACE}-daemonset-${renamed}`;
  try {
    // The old DaemonSet deleted with --cascade=orphan, a new one of another name adopts its pods;
    // the garbage collector deletes the CSIAddonsNode the old one owned.
    const uid = "5f0c7c1e-1111-4a4a-9d9d-0000000000a2";
    await api.create({ ...daemonSet(), metadata: { ...(daemonSet()["metadata"] as Obj), name: renamed, uid } });
    const ref = (pod()["metadata"] as Obj)["ownerReferences"][0] as Obj;
    api.update({ ...p, metadata: { ...p.metadata, ownerReferences: [{ ...ref, name: renamed, uid }] } });
    api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);

    const made = await waitFor("made under the new name", () => api.get(CAN, "CSIAddonsNode", NAMESPACE, newName) as Obj | undefined);
    assert.deepEqual(
      made.metadata.ownerReferences.map((o: Obj) => [o.name, o.uid]),
      [[renamed, uid]],
    );
    await placed(m);
    assert.equal(stored(), undefined, "nothing left under the old name");
    assert.deepEqual(
      lines.filter((l) => l["message"] === "created CSIAddonsNode").map((l) => l["name"]),
      [CSI_ADDONS_NODE_NAME, newName],
    );
    // The watch follows the new name: a deletion there is seen at once, not at the periodic check.
    api.delete(CAN, "CSIAddonsNode", NAMESPACE, newName);
    const again = await waitFor("made again under the new name", () => (api.get(CAN, "CSIAddonsNode", NAMESPACE, newName) as Obj | undefined) ?? false);
    assert.notEqual(again.metadata.uid, made.metadata.uid);
  } finally {
    const now = api.get("v1", "Pod", NAMESPACE, POD) as Obj;
    api.update({ ...now, metadata: { ...now.metadata, ownerReferences: p.metadata.ownerReferences } });
    api.delete("apps/v1", "DaemonSet", NAMESPACE, renamed);
    if (api.get(CAN, "CSIAddonsNode", NAMESPACE, newName)) api.delete(CAN, "CSIAddonsNode", NAMESPACE, newName);
  }
});

/** A CSIAddonsNode of another driver under our name: its immutable spec.driver.name makes our update a 422. */
const foreign = () => api.create(csiNode(CSI_ADDONS_NODE_NAME, NAMESPACE, { name: "other.csi.example.com", endpoint: "pod://x.csi:9070", nodeID: NODE }));
/** A manager started with its first `verb` of the CSIAddonsNode held a second at the API server; returns once that request is there. */
async function firstHeld(verb: "create" | "update" | "delete") {
  api.faults.latency(1_000, { verb, resource: "csiaddonsnodes" });
  const made = manager();
  made.m.setDriver(DRIVER);
  await waitFor(`the manager's ${verb} to arrive`, () => api.counters.get(verb, "csiaddonsnodes") >= 1);
  return made;
}
/** A manager replacing a foreign object, its delete held for a second at the API server. */
async function deleteOfForeignHeld() {
  await foreign();
  return firstHeld("delete");
}
const failures = (lines: Record<string, unknown>[]) => lines.filter((l) => l["message"] === "cannot put CSIAddonsNode in place; retrying");

test("an object of another driver is deleted and made anew; gone meanwhile (404 on the delete) is no failure", async () => {
  const { m, lines } = await deleteOfForeignHeld();
  // Readiness says why while the delete is on its way.
  assert.equal(m.presence.condition.ok, false);
  assert.match(m.presence.condition.reason, /being replaced: immutable fields differ/);
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  api.faults.clear();
  await placed(m);
  assert.equal(stored()!.spec.driver.name, DRIVER);
  assert.ok(lines.some((l) => l["level"] === "warn" && l["message"] === "CSIAddonsNode has immutable fields that differ; replacing it"));
  assert.deepEqual(failures(lines), []);
});

test("an object of another driver replaced by a newer one meanwhile (409 on the delete by uid): the newer is not deleted blindly, it is read and replaced in turn, and that is no failure", async () => {
  const { m, lines } = await deleteOfForeignHeld();
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await foreign();
  api.faults.clear();
  await placed(m);
  assert.equal(stored()!.spec.driver.name, DRIVER);
  assert.ok(api.counters.get("delete", "csiaddonsnodes") >= 2, "the newer object read and deleted in turn");
  assert.deepEqual(failures(lines), []);
});

test("an object of another driver whose delete fails (500): a failure, logged with its reason, and retried", async () => {
  await foreign();
  api.faults.failNext(1, 500, { verb: "delete", resource: "csiaddonsnodes" });
  const { m, lines } = manager();
  m.setDriver(DRIVER);
  await placed(m);
  assert.equal(stored()!.spec.driver.name, DRIVER);
  assert.equal(failures(lines).length, 1);
  assert.match(String(failures(lines)[0]!["reason"]), /^500 /);
});

test("deleted: logged as deleted, readiness says so at once; changed by someone else: put back without readiness lapsing or a deletion logged", async () => {
  const { m, lines } = manager();
  m.setDriver(DRIVER);
  await placed(m);
  const changes: { ok: boolean; reason: string }[] = [];
  m.presence.on("change", (c) => void changes.push(c));

  const cur = stored()!;
  api.update({ ...cur, spec: { driver: { ...cur.spec.driver, endpoint: "pod://elsewhere.csi:9070" } } });
  await waitFor("the endpoint put back", () => stored()!.spec.driver.endpoint === ENDPOINT);
  assert.equal(changes.length, 0, "ready all along");
  assert.ok(!lines.some((l) => l["message"] === "CSIAddonsNode was deleted; recreating it"));

  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await waitFor("recreated", () => stored() !== undefined && m.presence.condition.ok);
  assert.equal(changes[0]!.ok, false);
  assert.match(changes[0]!.reason, /missing \(deleted\)/, "not ready from the deletion's event on, before any read");
  assert.equal(lines.filter((l) => l["message"] === "CSIAddonsNode was deleted; recreating it").length, 1);
});

test("its watch failing, the periodic check alone (every third of the bound) keeps it ready, finds it deleted and makes it again, finds it changed and puts it back; the watch's errors logged at debug", async () => {
  api.faults.failNext(100_000, 500, { verb: "watch", resource: "csiaddonsnodes" });
  const { m, lines, callsOf } = manager(300);
  m.setDriver(DRIVER);
  await placed(m);
  const changes: boolean[] = [];
  m.presence.on("change", (c) => void changes.push(c.ok));
  const from = callsOf("getCSIAddonsNode").length;
  await waitFor("five periodic checks", () => callsOf("getCSIAddonsNode").length >= from + 5);
  assert.equal(changes.length, 0, "ready past the 300 ms bound: each check confirms it");
  const at = callsOf("getCSIAddonsNode")
    .slice(from)
    .map((c) => c.at);
  for (let i = 1; i < at.length; i++) assert.ok(at[i]! - at[i - 1]! >= 90, `checks ${at[i]! - at[i - 1]!} ms apart`);
  const watchErrors = lines.filter((l) => l["message"] === "CSIAddonsNode watch ended with an error; restarting");
  assert.ok(watchErrors.length >= 1 && watchErrors.every((l) => l["level"] === "debug"));
  assert.match(String(watchErrors[0]!["reason"]), /^500 /);

  const uid = stored()!.metadata.uid;
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await waitFor("made again", () => stored() !== undefined && stored()!.metadata.uid !== uid && m.presence.condition.ok);
  assert.ok(lines.some((l) => l["level"] === "warn" && l["message"] === "CSIAddonsNode not found on a periodic check; creating it again"));
  assert.ok(changes.includes(false), "not ready while it was missing");

  const cur = stored()!;
  api.update({ ...cur, spec: { driver: { ...cur.spec.driver, endpoint: "pod://elsewhere.csi:9070" } } });
  await waitFor("the endpoint put back by the periodic check", () => stored()!.spec.driver.endpoint === ENDPOINT);
});

/**
 * The real API, but the object's watch stays open and says nothing (a proxy that stalls the stream):
 * only the periodic check can see what changes.
 */
function stalledWatch(over: KubeApi): KubeApi {
  return new Proxy(over, {
    get(target, prop, receiver) {
      if (prop !== "watchCSIAddonsNode") return Reflect.get(target, prop, receiver) as unknown;
      return () =>
        ({ signal }: { signal: AbortSignal }) =>
          new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    },
  });
}

test("its watch stalled (open, silent), the periodic check alone finds the object changed and puts it back, finds it being deleted and says so, and finds it gone and makes it again", async () => {
  const { m } = manager(300, stalledWatch(real));
  m.setDriver(DRIVER);
  await placed(m);
  const cur = stored()!;
  api.update({ ...cur, spec: { driver: { ...cur.spec.driver, endpoint: "pod://elsewhere.csi:9070" } } });
  await waitFor("the endpoint put back", () => stored()!.spec.driver.endpoint === ENDPOINT);

  const now = stored()!;
  api.update({ ...now, metadata: { ...now.metadata, finalizers: ["csiaddons.openshift.io/node"] } });
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await waitFor("not ready while it is being deleted", () => !m.presence.condition.ok);
  assert.match(m.presence.condition.reason, /being deleted/);

  const held = stored()!;
  api.update({ ...held, metadata: { ...held.metadata, finalizers: [] } });
  const again = await waitFor("made again once the deletion ended", () => stored() && stored()!.metadata.uid !== now.metadata.uid && stored());
  await placed(m);

  // Deleted at once, nothing reconciling: the periodic check alone finds it gone and has it made again.
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await waitFor("made again after a deletion the watch did not tell", () => stored() && stored()!.metadata.uid !== again.metadata.uid);
  await placed(m);
});

test("the periodic check finding the Pod's owner made again (same name, new uid) puts the object under it at once, not one check later", async () => {
  // Checks every 500 ms, the watch silent: a change of owner is seen by a check only.
  const { m, methods } = manager(1_500, stalledWatch(real));
  m.setDriver(DRIVER);
  await placed(m);
  const from = methods().length;
  // The DaemonSet deleted with --cascade=orphan and made again; its pods adopted. No garbage
  // collector has deleted the object yet: it only needs the new owner.
  api.delete("apps/v1", "DaemonSet", NAMESPACE, DAEMONSET);
  const newUid = "5f0c7c1e-1111-4a4a-9d9d-0000000000b3";
  await api.create({ ...daemonSet(), metadata: { ...(daemonSet()["metadata"] as Obj), uid: newUid } });
  const p = api.get("v1", "Pod", NAMESPACE, POD) as Obj;
  const ref = (pod()["metadata"] as Obj)["ownerReferences"][0] as Obj;
  api.update({ ...p, metadata: { ...p.metadata, ownerReferences: [{ ...ref, uid: newUid }] } });

  await waitFor("owned by the new DaemonSet", () => stored()!.metadata.ownerReferences.some((o: Obj) => o.uid === newUid));
  assert.deepEqual(
    stored()!.metadata.ownerReferences.map((o: Obj) => o.uid),
    [newUid],
  );
  const calls = methods().slice(from);
  const replaced = calls.indexOf("replaceCSIAddonsNode");
  // The check's read of the Pod that saw the new owner, then the reconcile's read and write; a
  // check that waited for its next round would read the Pod and the object once more first.
  assert.deepEqual(calls.slice(replaced - 2, replaced + 1), ["getPod", "getCSIAddonsNode", "replaceCSIAddonsNode"]);
});

test("events through the watch confirm the object while the periodic check's reads fail: ready past the bound", async () => {
  const { m, callsOf } = manager(300);
  m.setDriver(DRIVER);
  await placed(m);
  const changes: boolean[] = [];
  m.presence.on("change", (c) => void changes.push(c.ok));
  api.faults.failNext(100_000, 500, { verb: "get", resource: "csiaddonsnodes" });
  const from = callsOf("getCSIAddonsNode").length;
  // Someone else (the upstream controller) labels the object every 50 ms: each change an event.
  let beat = 0;
  const writer = setInterval(() => {
    const cur = stored()!;
    api.update({ ...cur, metadata: { ...cur.metadata, labels: { ...cur.metadata.labels, beat: String(++beat) } } });
  }, 50);
  try {
    await waitFor("six failed periodic checks (two bounds)", () => callsOf("getCSIAddonsNode").length >= from + 6);
  } finally {
    clearInterval(writer);
  }
  assert.deepEqual(changes, [], "ready all along: the events are the API confirming it");
  assert.equal(callsOf("replaceCSIAddonsNode").length, 0, "another's label is no change to put right");
});

test("while the reconcile waits out a pending deletion, the periodic check leaves it alone", async () => {
  await pendingDeletion();
  const { m, callsOf } = manager(300);
  // Each read of the object takes longer than a period of the check (100 ms), so a check that
  // does not wait for the reconcile's read in flight comes in during it.
  api.faults.latency(150, { verb: "get", resource: "csiaddonsnodes" });
  m.setDriver(DRIVER);
  // Reads after 150, 500 and 850 ms: eight periods of the check pass meanwhile.
  await waitFor("three reads of the object", () => callsOf("getCSIAddonsNode").length >= 3);
  assert.equal(callsOf("getPod").length, 1, "the Pod read by the reconcile only");
  assert.equal(callsOf("getCSIAddonsNode").length, 3, "the object read by the reconcile only");
});

/** A manager placed and watching; then its watch dropped, and the next `n` watch requests answered 500. */
test("an API that fails before the object is placed: readiness names the API's error, and no longer once the object is placed", async () => {
  api.faults.failNext(1_000, 500, { verb: "get", resource: "pods" });
  const { m } = manager();
  m.setDriver(DRIVER);
  await waitFor("readiness naming the API's error", () => /not confirmed by the API yet; last API error: 500 /.test(m.presence.condition.reason));
  assert.equal(m.presence.condition.ok, false);
  api.faults.clear();
  await placed(m);
  assert.doesNotMatch(m.presence.condition.reason, /last API error/);
});

test("closed: readiness changes no more, not even when the bound passes without a confirmation", async () => {
  const { m } = manager(300);
  m.setDriver(DRIVER);
  await placed(m);
  const changes: unknown[] = [];
  m.presence.on("change", (c) => changes.push(c));
  m.close();
  // Timers fire in the order they are due: the presence's expiry (due 300 ms after its last
  // confirmation, before close()) fires before this one.
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepEqual(changes, []);
});

test("the API failing while the object is put in place: the outage logged once when it starts (warn) and once when it ends, with the number of failed requests", async () => {
  api.faults.failNext(3, 500, { verb: "get", resource: "pods" });
  const { m, lines } = manager();
  m.setDriver(DRIVER);
  await placed(m);
  assert.deepEqual(
    failures(lines).map((l) => l["level"]),
    ["warn", "debug", "debug"],
  );
  const answered = lines.filter((l) => l["message"] === "the Kubernetes API answers again");
  assert.deepEqual(
    answered.map((l) => [l["level"], l["failedRequests"]]),
    [["info", 3]],
  );
});

test("an object in place at start (the sidecar restarted): updated once, then left alone", async () => {
  await api.create(ours());
  const { m, callsOf } = manager(300);
  m.setDriver(DRIVER);
  await placed(m);
  const reads = callsOf("getCSIAddonsNode").length;
  await waitFor("three periodic checks", () => callsOf("getCSIAddonsNode").length >= reads + 3);
  assert.equal(callsOf("replaceCSIAddonsNode").length, 1);
  assert.equal(callsOf("createCSIAddonsNode").length, 0);
});

test("created by someone else between our read and our create (409): read again and updated, and that is no failure", async () => {
  const { m, lines, callsOf } = await firstHeld("create");
  await api.create(ours());
  await placed(m);
  assert.equal(callsOf("replaceCSIAddonsNode").length, 1);
  assert.deepEqual(failures(lines), []);
});

test("no object at start and its create held at the API server: readiness says it is not found", async () => {
  const { m } = await firstHeld("create");
  assert.equal(m.presence.condition.ok, false);
  assert.match(m.presence.condition.reason, /missing \(not found\)/);
  await placed(m);
});

test("deleted between our read and our update (404): read again and made anew at once, and that is no failure", async () => {
  await api.create(ours());
  const old = stored()!;
  const { m, lines, callsOf } = await firstHeld("update");
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await placed(m);
  assert.notEqual(stored()!.metadata.uid, old.metadata.uid);
  assert.equal(callsOf("createCSIAddonsNode").length, 1);
  assert.deepEqual(failures(lines), []);
});

test("an object in place at start keeps other owners' references; ours replaces the one to a former owner of the same name", async () => {
  const ref = (kind: string, name: string, uid: string) => ({ apiVersion: kind === "ConfigMap" ? "v1" : "apps/v1", kind, name, uid });
  const others = [
    ref("DaemonSet", `${DAEMONSET}-other`, "5f0c7c1e-1111-4a4a-9d9d-0000000000b1"),
    ref("ConfigMap", DAEMONSET, "5f0c7c1e-1111-4a4a-9d9d-0000000000b2"),
  ];
  const former = ref("DaemonSet", DAEMONSET, "5f0c7c1e-1111-4a4a-9d9d-0000000000b3");
  const left = ours();
  await api.create({ ...left, metadata: { ...(left["metadata"] as Obj), ownerReferences: [...others, former] } });
  const { m } = manager();
  m.setDriver(DRIVER);
  await placed(m);
  const ds = api.get("apps/v1", "DaemonSet", NAMESPACE, DAEMONSET) as Obj;
  assert.deepEqual(
    stored()!.metadata.ownerReferences.map((o: Obj) => [o.kind, o.name, o.uid]),
    [...others.map((o) => [o.kind, o.name, o.uid]), ["DaemonSet", DAEMONSET, ds.metadata.uid]],
  );
});

test("a periodic check whose read a reconcile overtook leaves the object to the reconcile: a deletion the watch told is not warned about again as 'not found on a periodic check'", async () => {
  const { m, lines, callsOf } = manager(600);
  m.setDriver(DRIVER);
  await placed(m);
  const uid = stored()!.metadata.uid;
  // Reads answered 500 ms late: the check's read is answered after the deletion below, and the
  // reconcile the watch's DELETED event starts is still reading when that answer arrives.
  api.faults.latency(500, { verb: "get", resource: "csiaddonsnodes" });
  const reads = callsOf("getCSIAddonsNode").length;
  await waitFor("a periodic check's read on its way", () => callsOf("getCSIAddonsNode").length > reads);
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await waitFor("made again", () => stored() && stored()!.metadata.uid !== uid);
  assert.ok(lines.some((l) => l["message"] === "CSIAddonsNode was deleted; recreating it"));
  assert.deepEqual(
    lines.filter((l) => l["message"] === "CSIAddonsNode not found on a periodic check; creating it again"),
    [],
  );
});

// node/manager: its watch of the CSIAddonsNode failing, resuming from the last resourceVersion and
// starting over, against the in-memory API. Apart from manager.test.ts (the same setup) because
// these tests wait out real backoffs: the two files run side by side.
// unit tier: own process (its tests wait out the watch's real backoffs, about 20 s in all).
import { test } from "node:test";
import assert from "node:assert/strict";
import { waitFor } from "../../../support/wait.js";
import { CSI_ADDONS_NODE_NAME, DRIVER, NAMESPACE } from "../../../support/fixtures.js";
import { createKubeApi } from "../../../../sidecar/kube/client.js";
import { kubeconfigEndpoint } from "../../../../sidecar/kube/kubeconfig.js";
import { KubeTransport } from "../../../../sidecar/kube/transport.js";
import { startTestKube } from "../../../support/cluster.js";
import { CAN, api, manager, placed, stored, useNodeManagerHarness } from "../../../support/node-manager.js";

useNodeManagerHarness();

/** A CSIAddonsNode with our spec under our name, as one left by an earlier pod (no owner reference). */

/** Our object, deleted while a finalizer holds it: it stays with a deletionTimestamp. */

async function watchDroppedThenFailing(n: number) {
  const made = manager();
  made.m.setDriver(DRIVER);
  await placed(made.m);
  // Standing at the server, not only asked for: a watch the server takes in after the drop would
  // see the deletion itself, and the resumption would not be tested (it happened on a busy machine).
  await waitFor("the watch", () => made.callsOf("watchCSIAddonsNode").length === 1 && api.counters.get("watch", "csiaddonsnodes") === 1);
  api.faults.failNext(n, 500, { verb: "watch", resource: "csiaddonsnodes" });
  api.faults.dropWatches();
  return made;
}

test("a failed watch resumes from the last resourceVersion seen: the object not read or written again, and what the watch missed still seen", async () => {
  const { callsOf } = await watchDroppedThenFailing(1);
  // Deleted while the watch is down (its retry waits 200 ms): only the resumed watch can tell.
  const uid = stored()!.metadata.uid;
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await waitFor("made again", () => stored() !== undefined && stored()!.metadata.uid !== uid);
  assert.ok(callsOf("watchCSIAddonsNode").length >= 3, "dropped, failed, resumed");
  assert.equal(callsOf("replaceCSIAddonsNode").length, 0, "no rewrite for a failed watch");
  assert.equal(callsOf("createCSIAddonsNode").length, 2);
});

test("a watch too far behind (410 Gone) starts over from a fresh read and write, and its count of failed watches with it", async (t) => {
  const small = await startTestKube([], { historySize: 5 });
  const smallTransport = new KubeTransport(await kubeconfigEndpoint(small.kubeconfigPath));
  t.after(async () => {
    smallTransport.close();
    await small.stop();
  });
  const { m, lines, callsOf } = manager(60_000, createKubeApi(smallTransport));
  m.setDriver(DRIVER);
  await placed(m);
  await waitFor("the watch", () => callsOf("watchCSIAddonsNode").length === 1);
  // While the API server is away, CSIAddonsNodes move on past their window of 5 events (each
  // resource keeps its own, as the watch cache does; written in process, so however slow the
  // machine, the watch cannot come back before they are all in).
  await small.faults.down();
  for (let i = 0; i < 10; i++) {
    await small.create({
      apiVersion: "csiaddons.openshift.io/v1alpha1",
      kind: "CSIAddonsNode",
      metadata: { name: `churn-${i}`, namespace: NAMESPACE },
      spec: { driver: { name: "other.example.com", endpoint: "pod://other.csi:9070", nodeID: `churn-${i}` } },
    });
  }
  await small.faults.up();
  await waitFor("the object read and written again", () => callsOf("replaceCSIAddonsNode").length === 1);
  await waitFor("watching again from the new write", () => callsOf("watchCSIAddonsNode").length >= 3);
  assert.equal(callsOf("getCSIAddonsNode").length, 2);
  const updated = lines.filter((l) => l["message"] === "updated CSIAddonsNode");
  assert.deepEqual(
    updated.map((l) => [l["level"], l["name"], l["namespace"]]),
    [["info", CSI_ADDONS_NODE_NAME, NAMESPACE]],
  );
  assert.ok(m.presence.condition.ok);
  // A watch tried while the server was down may have failed; the 410 is not such an error.
  assert.ok(
    !lines.some((l) => l["message"] === "CSIAddonsNode watch ended with an error; restarting" && /^410 /.test(String(l["reason"]))),
    "410 is not an error to back off from",
  );

  // Started over, the count of failed watches starts over too: five in a row are not yet six.
  // Counted where they arrive: a watch still on its way when the others are dropped fails there.
  const watches = small.counters.get("watch", "csiaddonsnodes");
  small.faults.failNext(5, 500, { verb: "watch", resource: "csiaddonsnodes" });
  small.faults.dropWatches();
  await waitFor("five failed watches, then one that holds", () => small.counters.get("watch", "csiaddonsnodes") >= watches + 6, { timeoutMs: 40_000 });
  assert.equal(callsOf("replaceCSIAddonsNode").length, 1);
});

test("the periodic check failing: the outage logged once when it starts (warn) and once when it ends, with the number of failed requests", async () => {
  const { m, lines, callsOf } = manager(300);
  m.setDriver(DRIVER);
  await placed(m);
  const from = callsOf("getCSIAddonsNode").length;
  api.faults.failNext(3, 500, { verb: "get", resource: "csiaddonsnodes" });
  await waitFor("the API answering again", () => lines.some((l) => l["message"] === "the Kubernetes API answers again"));
  assert.ok(callsOf("getCSIAddonsNode").length >= from + 4);
  const outage = lines.filter((l) => l["message"] === "cannot confirm the CSIAddonsNode with the Kubernetes API");
  assert.deepEqual(
    outage.map((l) => l["level"]),
    ["warn", "debug", "debug"],
  );
  assert.match(String(outage[0]!["reason"]), /^500 /);
  assert.equal(lines.find((l) => l["message"] === "the Kubernetes API answers again")!["failedRequests"], 3);

  // A second outage is a new one: its first failure is at warn again.
  api.faults.failNext(1, 500, { verb: "get", resource: "csiaddonsnodes" });
  await waitFor("the second outage over", () => lines.filter((l) => l["message"] === "the Kubernetes API answers again").length === 2);
  assert.equal(lines.filter((l) => l["message"] === "cannot confirm the CSIAddonsNode with the Kubernetes API").at(-1)!["level"], "warn");
});

test("a watch that keeps failing from its resourceVersion (six times in a row) starts over from a read and a write", async () => {
  const { m, callsOf, methods } = await watchDroppedThenFailing(6);
  await waitFor("the object read and written again", () => callsOf("replaceCSIAddonsNode").length === 1, { timeoutMs: 20_000 });
  await waitFor("watching from the write", () => callsOf("watchCSIAddonsNode").length >= 8);
  // Dropped, then six failed watches from the old resourceVersion; then one from the new write.
  const all = methods();
  assert.equal(all.slice(0, all.indexOf("replaceCSIAddonsNode")).filter((x) => x === "watchCSIAddonsNode").length, 7);
  assert.ok(m.presence.condition.ok);
});

test("failed watches are counted in a row only: three, then a watch that delivers an event, then five more do not start over from a read and a write", async () => {
  const { m, callsOf } = await watchDroppedThenFailing(3);
  // At least: a watch that stands may still end (and be resumed) before the next step looks.
  await waitFor("the watch back after three failures", () => callsOf("watchCSIAddonsNode").length >= 5);
  // An event through the resumed watch: deleted and, once the manager saw it, made again.
  api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await waitFor("made again", () => callsOf("createCSIAddonsNode").length === 2 && stored() !== undefined);
  const reads = callsOf("getCSIAddonsNode").length;
  const watches = callsOf("watchCSIAddonsNode").length;
  // Five: one short of starting over, counted from 0 again after the event.
  api.faults.failNext(5, 500, { verb: "watch", resource: "csiaddonsnodes" });
  api.faults.dropWatches();
  await waitFor("the watch back after five more failures", () => callsOf("watchCSIAddonsNode").length >= watches + 6, { timeoutMs: 20_000 });
  assert.equal(callsOf("replaceCSIAddonsNode").length, 0, "eight failures, but not six in a row: no rewrite");
  assert.equal(callsOf("getCSIAddonsNode").length, reads, "and no read");
  assert.ok(m.presence.condition.ok);
});

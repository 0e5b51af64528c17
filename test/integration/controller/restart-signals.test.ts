// Restarts as they really happen (DESIGN 4.2, 4.3, 7.2), with real processes: the in-memory API,
// the driver-stub, the sidecar and the controller. Each test starts from the previous one's end
// (the first sight handled, or the last restart), as a cluster lives through them in turn.
// pv-c is a volume of a driver without attach: only the Pod that mounts its claim shows it.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startControllerProc, type ControllerProc } from "../../support/controller.js";
import { waitFor } from "../../support/wait.js";
import { CSI_ADDONS_NODE_NAME, NAMESPACE, POD } from "../../support/fixtures.js";
import { CAN, HANDLED, RESTARTED_AT, runningPod, started, startStack, type Stack } from "../../support/stack.js";

const RECONNECTED_AT = "sidecar.csiaddons.openshift.io/driverReconnectedAt";
const NEW_POD_UID = "7d1e0b5a-4444-4a4a-9d9d-00000000abcd";

let stack: Stack;
let controller: ControllerProc | undefined;

const startController = async (args: string[] = []) => (controller = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath, args }));
const healCounts = () => stack.pvs.map((pv) => stack.heals(pv));
const checkCounts = () => stack.pvs.map((pv) => stack.healthChecks(pv));
const plus = (counts: number[], n: number) => counts.map((c) => c + n);
const decisions = (trigger: string) => controller!.heals({ trigger }).map((l) => [l.pv, l.mode]);

before(async () => {
  stack = await startStack({ volumes: { "pv-a": { state: "HEALTHY" }, "pv-b": { state: "HEALTHY" }, "pv-c": { state: "HEALTHY" } }, withoutAttach: ["pv-c"] });
  await stack.startSidecar();
  await startController();
  await stack.waitHandled();
});

after(async () => {
  // (6) over the whole run: every list of Pods came from the API server's cache.
  const quorum = stack?.kube.counters.withResourceVersion("list", "pods", "unset");
  await controller?.stop();
  await stack?.stop();
  assert.equal(quorum, 0, "no Pod list without a resourceVersion");
});

test("(1) driver and sidecar killed together and started again: every volume healed ALWAYS once", async () => {
  const start = healCounts();
  const restarts = decisions("restart").length;
  await stack.sidecar!.stop();
  await stack.replaceDriver();
  await stack.startSidecar();
  await waitFor("the new sidecar to record the restart it did not see", () => stack.annotation(RESTARTED_AT));
  await stack.waitHandled();
  await waitFor("every volume answered", () => decisions("restart").length === restarts + 3);
  assert.deepEqual(healCounts(), plus(start, 1));
  assert.deepEqual(
    decisions("restart").slice(restarts).sort(),
    stack.pvs.map((pv) => [pv, "ALWAYS"]),
  );
});

test("(2) a driver without a boot id whose connection drops: checked IF_ABNORMAL, never ALWAYS", async () => {
  const heals = healCounts();
  const checks = checkCounts();
  const restartedAt = stack.annotation(RESTARTED_AT);
  await stack.replaceDriver(["--no-boot-id"]);
  await waitFor("driverReconnectedAt recorded", () => stack.annotation(RECONNECTED_AT));
  await stack.waitHandled();
  await waitFor("every volume checked", () => decisions("reconnect").length === 3);
  assert.equal(stack.annotation(RESTARTED_AT), restartedAt, "not recorded as a restart");
  assert.deepEqual(healCounts(), heals, "no ALWAYS");
  assert.deepEqual(
    decisions("reconnect").sort(),
    stack.pvs.map((pv) => [pv, "IF_ABNORMAL"]),
  );
  assert.ok(checkCounts().every((n, i) => n > checks[i]!));
});

test("(3) the object deleted between the restart and the heal: healed ALWAYS; deleted after the heal: no second ALWAYS", async () => {
  await controller!.stop();
  const start = healCounts();
  const before = stack.annotation(RESTARTED_AT);
  await stack.replaceDriver(); // a boot id again: a restart
  await waitFor("the restart recorded", () => stack.annotation(RESTARTED_AT) !== before);
  const uid = stack.csiAddonsNode()!.metadata.uid;
  stack.kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await waitFor("the object made again", () => stack.csiAddonsNode() && stack.csiAddonsNode()!.metadata.uid !== uid);
  await startController();
  await stack.waitHandled();
  await waitFor("every volume answered", () => decisions("restart").length === 3);
  assert.deepEqual(healCounts(), plus(start, 1), "ALWAYS once, not downgraded to a check");

  // Deleted after the heal, once the sidecar saw the handled marker.
  const marker = stack.annotation(HANDLED);
  await waitFor("the sidecar to see the handled marker", () =>
    stack.sidecar!.logLines().some((l) => l.message === "CSIAddonsNode restart annotations" && (l.annotations as Record<string, string>)[HANDLED] === marker),
  );
  const uid2 = stack.csiAddonsNode()!.metadata.uid;
  stack.kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  await waitFor("the object made again, handled", () => stack.csiAddonsNode()?.metadata.uid !== uid2 && stack.annotation(HANDLED) === marker);
  // A controller started now reads the object afresh: nothing pending. A reconnection after it
  // shows it has read the object: checked, and still no second ALWAYS.
  await controller!.stop();
  await startController();
  await stack.replaceDriver(["--no-boot-id"]);
  await waitFor("the reconnection checked", () => decisions("reconnect").length === 3);
  assert.deepEqual(healCounts(), plus(start, 1), "no second ALWAYS");
  assert.equal(controller!.heals({ mode: "ALWAYS" }).length, 0);
});

test("(4) the node-plugin pod replaced while the controller is stopped, its object gone with it: healed ALWAYS once the controller starts; (5) the queue metrics move and reach zero", async () => {
  await controller!.stop();
  const start = healCounts();
  await stack.sidecar!.stop();
  // A first rollout of the sidecar: the old pod's object (and its history) is not there.
  stack.kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  stack.kube.delete("v1", "Pod", NAMESPACE, POD);
  await stack.kube.create(started(runningPod(NEW_POD_UID)));
  await stack.replaceDriver();
  // Heals slow enough for the queue metrics to be seen.
  stack.stub.updateState((s) => {
    for (const v of Object.values(s.volumes ?? {})) v.delayMs = 700;
  });
  await stack.startSidecar();
  await waitFor("the new pod's object", () => stack.annotation("sidecar.csiaddons.openshift.io/createdByPodUID") === NEW_POD_UID);
  assert.equal(stack.annotation(HANDLED), undefined, "no history: a first sight");
  await startController(["--per-node-concurrency=1"]);
  const waiting = await waitFor("volumes waiting", async () =>
    /csi_addons_healer_volumes_waiting\{trigger="first-sight"\} [1-9]/.exec(await controller!.metrics()),
  );
  assert.ok(waiting);
  assert.match(await controller!.metrics(), /csi_addons_healer_nodes_waiting\{trigger="first-sight"\} 1/);
  await stack.waitHandled(30_000);
  await waitFor("the queue metrics back at zero", async () =>
    /csi_addons_healer_volumes_waiting\{trigger="first-sight"\} 0\n/.test(await controller!.metrics()),
  );
  assert.match(await controller!.metrics(), /csi_addons_healer_nodes_waiting\{trigger="first-sight"\} 0\n/);
  assert.deepEqual(healCounts(), plus(start, 1), "every volume staged by the old pod healed ALWAYS");
  assert.deepEqual(
    decisions("first-sight").sort(),
    stack.pvs.map((pv) => [pv, "ALWAYS"]),
  );
});

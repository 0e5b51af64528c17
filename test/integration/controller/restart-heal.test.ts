// DESIGN 7.2, restart heal: the controller sees a new restart marker on the CSIAddonsNode (a
// driver restart, or a new node-plugin pod) and heals every volume of that node exactly once with
// ALWAYS, then records the marker. A sidecar it sees for the first time gets IF_ABNORMAL only.
// "Every volume" includes one that only a Pod on the node shows (a driver without attach).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startControllerProc, type ControllerProc } from "../../support/controller.js";
import { waitFor } from "../../support/wait.js";
import { NAMESPACE, POD } from "../../support/fixtures.js";
import { HANDLED, runningPod, startStack, type Stack } from "../../support/stack.js";

let stack: Stack;
let controller: ControllerProc;

before(async () => {
  // pv-c is a volume of a driver without attach: no VolumeAttachment and, as a kubelet does, not in
  // the Node's volumesInUse; only the Pod that mounts its claim says it is on this node.
  stack = await startStack({ volumes: { "pv-a": { state: "HEALTHY" }, "pv-b": { state: "HEALTHY" }, "pv-c": { state: "HEALTHY" } }, withoutAttach: ["pv-c"] });
  await stack.startSidecar();
  controller = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath });
});

after(async () => {
  await controller?.stop();
  await stack?.stop();
});

const healCounts = () => stack.pvs.map((pv) => stack.heals(pv));

test("first sight: IF_ABNORMAL only (history unknown), then the marker is recorded", async () => {
  const marker = await stack.waitHandled();
  assert.deepEqual(healCounts(), [0, 0, 0], "healthy volumes are checked, not re-staged");
  for (const pv of stack.pvs) assert.ok(stack.healthChecks(pv) >= 1, `${pv} checked`);
  const decisions = controller.heals({ trigger: "first-sight" });
  assert.deepEqual(
    decisions.map((l) => [l.pv, l.mode, l.result]).sort(),
    stack.pvs.map((pv) => [pv, "IF_ABNORMAL", "NOT_NEEDED"]),
  );
  assert.match(marker, /^[0-9a-f-]{36}\+$/, "marker = pod uid + (no driver restart yet)");
});

/** What the tests below start from, whether or not the tests before them ran: the first sight handled. */
async function baseline() {
  await stack.waitHandled();
  return { heals: healCounts(), restartDecisions: controller.heals({ trigger: "restart" }).length };
}
const plus = (counts: number[], n: number) => counts.map((c) => c + n);

test("killing the driver heals every volume of the node exactly once with ALWAYS", async () => {
  const start = await baseline();
  await stack.crashDriver();
  const marker = await stack.waitHandled();
  assert.ok(marker.endsWith(stack.annotation("sidecar.csiaddons.openshift.io/driverRestartedAt")!));
  assert.deepEqual(healCounts(), plus(start.heals, 1));
  const decisions = controller.heals({ trigger: "restart" }).slice(start.restartDecisions);
  assert.deepEqual(
    decisions.map((l) => [l.pv, l.mode, l.node]).sort(),
    stack.pvs.map((pv) => [pv, "ALWAYS", "node-1"]),
  );
  const metrics = await controller.metrics();
  assert.match(metrics, /csi_addons_healer_restart_heal_duration_seconds_count\{driver="stub.csi.example.com"\} 1/);
});

test("a new node-plugin pod (new pod UID) heals every volume once more", async () => {
  const start = await baseline();
  await stack.sidecar!.stop();
  stack.kube.delete("v1", "Pod", NAMESPACE, POD);
  await stack.kube.create(runningPod("7d1e0b5a-9999-4a4a-9d9d-00000000abcd"));
  const before = stack.annotation(HANDLED);
  await stack.startSidecar();
  await waitFor(
    "the new pod UID on the CSIAddonsNode",
    () => stack.annotation("sidecar.csiaddons.openshift.io/createdByPodUID") === "7d1e0b5a-9999-4a4a-9d9d-00000000abcd",
  );
  const marker = await stack.waitHandled();
  assert.notEqual(marker, before);
  assert.ok(marker.startsWith("7d1e0b5a-9999-4a4a-9d9d-00000000abcd+"));
  assert.deepEqual(healCounts(), plus(start.heals, 1), "exactly one more ALWAYS heal per volume");
  assert.equal(controller.heals({ trigger: "restart" }).length, start.restartDecisions + 3);
});

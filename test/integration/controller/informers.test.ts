// DESIGN 7.1: the informers survive the API server: after it was down (watches cut, connections
// refused) they resume from their last resourceVersion, and when that is compacted meanwhile
// (410 Gone) they list again — so a restart recorded while the controller could not watch is
// still healed.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startControllerProc, waitLog, type ControllerProc } from "../../support/controller.js";
import { NAMESPACE, CSI_ADDONS_NODE_NAME } from "../../support/fixtures.js";
import { CAN, RESTARTED_AT, startStack, type Stack } from "../../support/stack.js";

let stack: Stack;
let controller: ControllerProc;

before(async () => {
  stack = await startStack({
    volumes: { "pv-a": { state: "HEALTHY" }, "pv-b": { state: "HEALTHY" } },
    kube: { historySize: 20 },
  });
  await stack.startSidecar();
  controller = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath });
  await stack.waitHandled();
});

after(async () => {
  await controller?.stop();
  await stack?.stop();
});

test("after an API server outage and a compacted history (410), a restart recorded meanwhile is healed", async () => {
  const lists = () => stack.kube.counters.get("list", "csiaddonsnodes");
  const listsBefore = lists();
  await stack.kube.faults.down();
  // Meanwhile: more changes of CSIAddonsNodes than the server keeps for watch resumption, and a driver restart.
  for (let i = 1; i <= 30; i++) {
    const o = stack.kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as Record<string, any>;
    stack.kube.update({ ...o, metadata: { ...o.metadata, labels: { ...o.metadata.labels, churn: String(i) } } });
  }
  const obj = stack.kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as Record<string, any>;
  obj.metadata.annotations[RESTARTED_AT] = new Date().toISOString();
  stack.kube.update(obj);
  await waitLog(controller, { message: "watch ended with an error; resuming" });
  await stack.kube.faults.up();

  await stack.waitHandled();
  assert.deepEqual(
    stack.pvs.map((pv) => stack.heals(pv)),
    [1, 1],
  );
  assert.equal(controller.heals({ trigger: "restart" }).length, 2);
  assert.ok(lists() > listsBefore, "the resumed watch got 410 Gone and listed again");
});

// DESIGN 7.2/7.3: a restart heal for a sidecar that cannot be reached is not lost: the controller
// keeps waiting for it (backoff), resolves its endpoint again, and heals once it is back — on a
// new port (a new channel), exactly once per volume.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startControllerProc, waitLog, type ControllerProc } from "../../support/controller.js";
import { waitFor } from "../../support/wait.js";
import { NAMESPACE, CSI_ADDONS_NODE_NAME, POD } from "../../support/fixtures.js";
import { CAN, RESTARTED_AT, runningPod, startStack, type Stack } from "../../support/stack.js";

let stack: Stack;
let controller: ControllerProc | undefined;

before(async () => {
  stack = await startStack({ volumes: { "pv-a": { state: "HEALTHY" }, "pv-b": { state: "HEALTHY" } } });
  await stack.startSidecar();
  controller = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath });
  await stack.waitHandled();
  await controller.stop();
});

after(async () => {
  await controller?.stop();
  await stack?.stop();
});

test("a sidecar that is down is retried and healed once it is back", async () => {
  await stack.sidecar!.stop();
  // The driver restarted just before the sidecar went away: the marker is on the object, nobody
  // can be called.
  const obj = stack.kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as Record<string, any>;
  obj.metadata.annotations[RESTARTED_AT] = new Date().toISOString();
  stack.kube.update(obj);

  controller = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath });
  await waitLog(controller, { message: "restart heal", trigger: "restart" });
  await waitFor(
    "the controller to retry the unreachable sidecar",
    () => controller!.logLines().filter((l) => l.message === "waiting for sidecar").length >= 3,
    { timeoutMs: 30_000 },
  );
  assert.equal(stack.stub.calls({ method: "NodeHealVolume" }).length, 0);
  const connections = async (state: string) => new RegExp(`csi_addons_healer_sidecar_connections\\{state="${state}"\\} 1`).test(await controller!.metrics());
  await waitFor("the sidecar counted as unreachable", () => connections("unreachable"));
  const reasons = controller
    .logLines()
    .filter((l) => l.message === "waiting for sidecar")
    .map((l) => String(l["reason"]));
  assert.match(reasons[0] ?? "", /^unreachable at .*: UNAVAILABLE: .*ECONNREFUSED/, "the log says why");

  // Its pod gone too: the endpoint cannot be resolved; the controller keeps asking for the pod.
  stack.kube.delete("v1", "Pod", NAMESPACE, POD);
  await waitFor("the sidecar counted as unresolved", () => connections("unresolved"), { timeoutMs: 30_000 });
  await stack.kube.create(runningPod());

  await stack.startSidecar();
  await stack.waitHandled();
  assert.deepEqual(
    stack.pvs.map((pv) => stack.heals(pv)),
    [1, 1],
  );
  assert.deepEqual(
    controller.heals({ trigger: "restart", result: "HEALED" }).length + controller.heals({ trigger: "restart", result: "NOT_NEEDED" }).length,
    2,
  );
  assert.ok(await connections("serving"));
});

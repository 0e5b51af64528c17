// DESIGN 7.1: only sidecars whose relayed GetCapabilities lists VolumeHealer HEAL_VOLUME are
// touched. A driver that has not opted in is never asked to heal or check, not on first sight
// and not after a restart, and its CSIAddonsNode is left as it is.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startControllerProc, waitLog, type ControllerProc } from "../../support/controller.js";
import { waitFor } from "../../support/wait.js";
import { HANDLED, startStack, type Stack } from "../../support/stack.js";

let stack: Stack;
let controller: ControllerProc;

before(async () => {
  stack = await startStack({
    volumes: { "pv-a": { state: "ABNORMAL" }, "pv-b": { state: "HEALTHY" } },
    stub: { capabilities: { getVolumeHealth: false, healVolume: false } },
  });
  await stack.startSidecar();
  controller = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath, args: ["--check-interval=500ms"] });
});

after(async () => {
  await controller?.stop();
  await stack?.stop();
});

const capabilityReads = () => stack.stub.calls({ method: "GetCapabilities" }).length;

test("a driver without VolumeHealer is never called, even after a driver restart", async () => {
  await waitLog(controller, { message: "sidecar left alone" });
  await stack.crashDriver();
  const reads = capabilityReads();
  // The restart pass and periodic passes each ask for capabilities first; wait for two more.
  await waitFor("the controller to check capabilities again", () => capabilityReads() >= reads + 2, { timeoutMs: 30_000 });
  assert.equal(stack.stub.calls({ method: "NodeHealVolume" }).length, 0);
  assert.equal(stack.stub.calls({ method: "NodeGetVolumeHealth" }).length, 0);
  assert.equal(controller.heals().length, 0, "no HealVolume reached the sidecar");
  assert.equal(stack.annotation(HANDLED), undefined, "the object is left alone");
});

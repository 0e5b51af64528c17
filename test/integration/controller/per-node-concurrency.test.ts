// --per-node-concurrency, read from the command line of a real controller: against a slow driver,
// at most N of the controller's heals reach one node's driver at once, and N do (the queue's own
// unit test builds the queue directly and never reads the flag). The cluster-wide bound
// (--max-concurrent-heals, default 2048) is far above N here, so only the per-node one can hold.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startControllerProc, type ControllerProc } from "../../support/controller.js";
import { startStack, type Stack } from "../../support/stack.js";
import { peakOverlap } from "../../support/intervals.js";

const PER_NODE = 2;
const SLOW = { state: "HEALTHY" as const, delayMs: 1000 };
const PVS = ["pv-a", "pv-b", "pv-c", "pv-d", "pv-e", "pv-f"];

let stack: Stack;
let controller: ControllerProc | undefined;

before(async () => {
  stack = await startStack({ volumes: Object.fromEntries(PVS.map((pv) => [pv, SLOW])) });
  await stack.startSidecar();
});

after(async () => {
  await controller?.stop();
  await stack?.stop();
});

test(`--per-node-concurrency=${PER_NODE}: the first-sight check of ${PVS.length} slow volumes reaches the node's driver ${PER_NODE} at a time`, async () => {
  controller = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath, args: [`--per-node-concurrency=${PER_NODE}`] });
  await stack.waitHandled();
  const calls = stack.stub.calls({ method: "NodeGetVolumeHealth" });
  assert.deepEqual(
    [...new Set(calls.map((c) => (c.request as { volumeId: string }).volumeId))].sort(),
    PVS.map((pv) => `handle-${pv}`),
    "every volume checked",
  );
  assert.equal(peakOverlap(calls), PER_NODE, `calls at once at the driver; ${JSON.stringify(calls.map((c) => [c.t0, c.t1]))}`);
});

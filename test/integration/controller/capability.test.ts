// DESIGN 7.1: only sidecars whose relayed GetCapabilities lists VolumeHealer HEAL_VOLUME are
// touched. A driver that has not opted in is never asked to heal or check, not on first sight
// and not after a restart, and its CSIAddonsNode is left as it is. It is said once (an Event on the
// object, a series by driver), and no periodic pass asks it again: a restart does.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startControllerProc, waitLog, type ControllerProc } from "../../support/controller.js";
import { waitFor } from "../../support/wait.js";
import { HANDLED, startStack, type Stack } from "../../support/stack.js";
import { NAMESPACE } from "../../support/fixtures.js";

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

test("a driver without VolumeHealer is never called, even after a driver restart; it is told once (one Event, one series by driver)", async () => {
  await waitLog(controller, { message: "sidecar left alone" });
  const reads = capabilityReads();
  // Killed and started again: the sidecar's handshake asks once, the restart pass once; periodic
  // passes (every 500 ms while the driver is down and back) ask nothing.
  await stack.crashDriver();
  await waitFor("the restart pass to ask", () => capabilityReads() >= reads + 2, { timeoutMs: 30_000 });
  const name = stack.csiAddonsNode()!.metadata.name;
  await waitFor("the restart's pass to end", () =>
    controller.logLines().some((l) => l.message === "restart heal skipped: the driver does not heal" && l.sidecar === `${NAMESPACE}/${name}`),
  );
  assert.equal(stack.stub.calls({ method: "NodeHealVolume" }).length, 0);
  assert.equal(stack.stub.calls({ method: "NodeGetVolumeHealth" }).length, 0);
  assert.equal(controller.heals().length, 0, "no HealVolume reached the sidecar");
  assert.equal(stack.annotation(HANDLED), undefined, "the object is left alone");
  const events = (stack.kube.list("v1", "Event", NAMESPACE) as any[]).filter((e) => e.reason === "DriverNotHealing");
  assert.deepEqual(
    events.map((e) => [e.involvedObject.kind, e.involvedObject.name, e.count ?? 1]),
    [["CSIAddonsNode", name, 1]],
    "one Event on the CSIAddonsNode, not one per pass",
  );
  assert.match(events[0].message, /does not offer VolumeHealer .*neither checked nor healed/);
  assert.equal(controller.logLines().filter((l) => l.message === "sidecar left alone").length, 1, "told once");
  assert.match(await controller.metrics(), /^csi_addons_healer_sidecars_not_healing\{driver="stub\.csi\.example\.com"\} 1$/m);
  assert.equal(capabilityReads(), reads + 2, "asked by the handshake and the restart pass only");
});

// DESIGN 7.5: the handled marker lives on the CSIAddonsNode, so a controller that dies in the
// middle of a restart heal loses nothing: its successor (the same process started again, or a
// standby replica taking over the Lease) heals the node again. Repeating a heal is allowed,
// losing one is not. Only the leader heals.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startControllerProc, waitLog, type ControllerProc } from "../../support/controller.js";
import { waitFor } from "../../support/wait.js";
import { startStack, type Stack } from "../../support/stack.js";

/** Slow heals, one at a time: a restart heal of four volumes takes seconds, long enough to die in it. */
const SLOW = { state: "HEALTHY" as const, delayMs: 1500 };
const ONE_AT_A_TIME = ["--per-node-concurrency=1"];
const LEADER_ARGS = [
  "--leader-elect=true",
  "--leader-election-namespace=csi",
  "--leader-election-lease-duration=3s",
  "--leader-election-renew-deadline=2s",
  "--leader-election-retry-period=500ms",
];

let stack: Stack;
const controllers: ControllerProc[] = [];

async function start(args: string[], waitStarted = true): Promise<ControllerProc> {
  const c = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath, args: [...ONE_AT_A_TIME, ...args], waitStarted });
  controllers.push(c);
  return c;
}

/** Heals each PV received since `before` (counts per PV). */
const healsSince = (before: number[]) => stack.pvs.map((pv, i) => stack.heals(pv) - before[i]!);

before(async () => {
  stack = await startStack({ volumes: { "pv-a": SLOW, "pv-b": SLOW, "pv-c": SLOW, "pv-d": SLOW } });
  await stack.startSidecar();
});

after(async () => {
  for (const c of controllers) await c.stop();
  await stack?.stop();
});

describe("restart heal survives the controller", () => {
  test("a controller killed mid-heal and started again finishes that restart heal", async () => {
    const first = await start([]);
    await stack.waitHandled();
    const before = stack.pvs.map((pv) => stack.heals(pv));
    await stack.crashDriver();
    await waitFor("the first restart heal answered", () => first.heals({ trigger: "restart" }).length >= 1, { timeoutMs: 30_000 });
    await first.kill();
    assert.ok(first.heals({ trigger: "restart" }).length < stack.pvs.length, "killed in the middle of the pass");

    const second = await start([]);
    await stack.waitHandled();
    const healed = healsSince(before);
    assert.ok(
      healed.every((n) => n >= 1),
      `every volume healed at least once: ${healed}`,
    );
    assert.ok(second.heals({ trigger: "restart" }).length >= 1, "the new process did heal");
  });

  test("leader failover between two controllers: the standby finishes the restart heal", async () => {
    for (const c of controllers.splice(0)) await c.stop();
    const a = await start([...LEADER_ARGS, "--leader-election-identity=ctl-a"]);
    await waitLog(a, { message: "became leader" });
    const b = await start([...LEADER_ARGS, "--leader-election-identity=ctl-b"]);
    // Run alone, this is the node's first sight: wait it out, so the crash below is a restart.
    await stack.waitHandled();
    const before = stack.pvs.map((pv) => stack.heals(pv));
    await stack.crashDriver();
    await waitFor("the leader's first restart heal", () => a.heals({ trigger: "restart" }).length >= 1, { timeoutMs: 30_000 });
    assert.equal(b.heals().length, 0, "the standby does not heal");
    await a.kill();
    assert.ok(a.heals({ trigger: "restart" }).length < stack.pvs.length, "killed in the middle of the pass");

    await waitLog(b, { message: "became leader" }, 30_000);
    await stack.waitHandled();
    const healed = healsSince(before);
    assert.ok(
      healed.every((n) => n >= 1),
      `every volume healed at least once: ${healed}`,
    );
    const lease = stack.kube.get("coordination.k8s.io/v1", "Lease", "csi", "csi-addons-healer-controller") as {
      spec: { holderIdentity: string; leaseTransitions: number };
    };
    assert.equal(lease.spec.holderIdentity, "ctl-b");
    assert.ok(lease.spec.leaseTransitions >= 1);
    assert.match(await b.metrics(), /csi_addons_healer_leader 1/);
  });
});

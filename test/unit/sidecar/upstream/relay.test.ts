// The upstream services' small rules, without processes: a method needs its capability's kind and
// type both, a bad PV name is shown in the error whole (or its first 64 characters when long), and
// a call its deadline cut is DEADLINE_EXCEEDED.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Capability_NetworkFence_Type as Fence, Capability_ReclaimSpace_Type as Reclaim, type Capability } from "../../../../proto/gen/identity/identity.js";
import { DomainError } from "../../../../sidecar/errors.js";
import type { CallContext } from "../../../../sidecar/server/context.js";
import { NEEDS, offers, requireCapability } from "../../../../sidecar/upstream/capabilities.js";
import { resolvePv } from "../../../../sidecar/upstream/pv.js";
import { Limiter } from "../../../../sidecar/relay/limiter.js";
import { relay, type UpstreamDeps, type Work } from "../../../../sidecar/upstream/relay.js";
import { driverInfo } from "../../../support/fixtures.js";

const driver = (capabilities: Capability[]) => driverInfo({ name: "d.example.com", capabilities });

test("a capability is offered only when both its kind and its type match", () => {
  const offline = driver([{ type: { $case: "reclaimSpace", reclaimSpace: { type: Reclaim.OFFLINE } } }]);
  assert.equal(offers(offline, NEEDS.reclaimOffline), true);
  assert.equal(offers(offline, NEEDS.reclaimOnline), false, "ReclaimSpace OFFLINE does not offer ONLINE");
  const fence = driver([{ type: { $case: "networkFence", networkFence: { type: Fence.NETWORK_FENCE } } }]);
  assert.equal(offers(fence, NEEDS.fence), true);
  assert.equal(offers(fence, NEEDS.fenceClients), false, "NETWORK_FENCE does not offer GET_CLIENTS_TO_FENCE");
  assert.equal(offers(fence, NEEDS.reclaimOffline), false, "another kind");
  assert.throws(
    () => requireCapability(offline, NEEDS.reclaimOnline),
    (e: Error) =>
      e instanceof DomainError && e.kind === "Unimplemented" && e.message === "driver d.example.com does not offer the ReclaimSpace ONLINE capability",
  );
});

test("a bad pv_name is INVALID_ARGUMENT naming it whole, or its first 64 characters and '...' when longer", async () => {
  // A bad name is refused before anything is read: deps and work are never touched.
  const ctx = { fields: {} } as unknown as CallContext;
  const refused = async (name: string) => {
    const err = await resolvePv({} as UpstreamDeps, ctx, name, {} as Work).then(
      () => assert.fail(`${name} accepted`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof DomainError && err.kind === "InvalidArgument", String(err));
    return err.message;
  };
  assert.equal(await refused("Bad_Name"), 'pv_name "Bad_Name" is not a valid PersistentVolume name');
  const exactly64 = `A${"b".repeat(63)}`;
  assert.equal(await refused(exactly64), `pv_name "${exactly64}" is not a valid PersistentVolume name`);
  const long = `X${"y".repeat(299)}`;
  assert.equal(await refused(long), `pv_name "${long.slice(0, 64)}"... is not a valid PersistentVolume name`);
  assert.deepEqual(ctx.fields, {}, "a refused name is not logged as the call's pv");
});

// setTimeout is mocked, so waitFor cannot be used: the test's own timeout bounds the wait instead.
test(
  "an upstream call cut by its deadline timer is DEADLINE_EXCEEDED even when the clock has not reached the deadline (the cut driver call answers CANCELLED)",
  { timeout: 10_000 },
  async (t) => {
    // Under load the deadline timer fires a few ms before Date.now() reaches the deadline (timers
    // run on the event loop's cached clock): ticking the mocked setTimeout does the same, by a minute.
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const offline: Capability[] = [{ type: { $case: "reclaimSpace", reclaimSpace: { type: Reclaim.OFFLINE } } }];
    const deps = { driver: { ready: true, driver: driver(offline) }, limiter: new Limiter(1, 1) } as unknown as UpstreamDeps;
    const ctx = {
      method: "/reclaimspace.ReclaimSpaceController/ControllerReclaimSpace",
      deadline: Date.now() + 60_000,
      signal: new AbortController().signal,
      fields: {},
    } as unknown as CallContext;
    let started = false;
    const answer = relay(deps, ctx, NEEDS.reclaimOffline, ({ signal }) => {
      started = true;
      return new Promise((_, reject) => signal.addEventListener("abort", () => reject(new DomainError("Cancelled", "call cancelled")), { once: true }));
    }).catch((e: unknown) => e);
    while (!started) await new Promise(setImmediate);
    t.mock.timers.tick(60_001);
    const err = await answer;
    assert.ok(err instanceof DomainError && err.kind === "DeadlineExceeded", String(err));
    assert.equal(err.message, "deadline exceeded while serving /reclaimspace.ReclaimSpaceController/ControllerReclaimSpace");
  },
);

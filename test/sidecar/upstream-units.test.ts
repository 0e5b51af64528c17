// The upstream services' small rules, without processes: a method needs its capability's kind and
// type both, and a bad PV name is shown in the error whole, or its first 64 characters when long.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Capability_NetworkFence_Type as Fence, Capability_ReclaimSpace_Type as Reclaim, type Capability } from "../../proto/gen/identity/identity.js";
import { DomainError } from "../../sidecar/errors.js";
import type { CallContext } from "../../sidecar/server/context.js";
import { NEEDS, offers, requireCapability } from "../../sidecar/upstream/capabilities.js";
import { resolvePv } from "../../sidecar/upstream/pv.js";
import type { UpstreamDeps, Work } from "../../sidecar/upstream/relay.js";
import { driverInfo } from "../support/fixtures.js";

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
    (e: Error) => e instanceof DomainError && e.kind === "Unimplemented" && e.message === "driver d.example.com does not offer the ReclaimSpace ONLINE capability",
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

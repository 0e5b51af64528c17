// LIST through client-node: field and label selectors, limit/continue over one consistent
// snapshot, 410 for a compacted continue token, and 400 for selectors a real server refuses.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { KubeApi } from "./server.js";
import { type Clients, kubeSuite, csiNode, failure, G, P, upstreamCrdFile, V } from "./testkit.js";

let api: KubeApi;
let c: Clients;
kubeSuite({ crdFiles: [upstreamCrdFile], historySize: 30, seed: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "other" } }] }, async (k) => {
  ({ api, c } = k);
  for (const [name, tier, ns] of [
    ["l-1", "gold", "default"],
    ["l-2", "silver", "default"],
    ["l-3", "gold", "default"],
    ["l-4", "gold", "other"],
  ] as const) {
    const body = csiNode(name, ns);
    body.metadata.labels = { tier };
    await c.custom.createNamespacedCustomObject({ group: G, version: V, plural: P, namespace: ns, body });
  }
});

const list = (q: Record<string, unknown> = {}, namespace = "default") =>
  c.custom.listNamespacedCustomObject({ group: G, version: V, plural: P, namespace, ...q }) as Promise<any>;
const names = (l: any) => l.items.map((o: any) => o.metadata.name);

describe("list", () => {
  test("items in name order, with the list's resourceVersion, kind and apiVersion", async () => {
    const l = await list();
    assert.deepEqual(names(l), ["l-1", "l-2", "l-3"]);
    assert.equal(l.kind, "CSIAddonsNodeList");
    assert.equal(l.apiVersion, `${G}/${V}`);
    assert.match(l.metadata.resourceVersion, /^\d+$/);
    const all: any = await c.custom.listClusterCustomObject({ group: G, version: V, plural: P });
    assert.deepEqual(names(all), ["l-1", "l-2", "l-3", "l-4"]);
  });

  test("resourceVersion=0: served from the cache, whole (limit ignored, no continue), never older than a write the client saw; counted apart from quorum lists", async () => {
    const before = { unset: api.counters.withResourceVersion("list", P, "unset"), zero: api.counters.withResourceVersion("list", P, "0") };
    const created: any = await c.custom.createNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default", body: csiNode("l-0") });
    const l = await list({ resourceVersion: "0", limit: 1 });
    assert.deepEqual(names(l), ["l-0", "l-1", "l-2", "l-3"]);
    assert.equal(l.metadata.continue, undefined);
    assert.ok(Number(l.metadata.resourceVersion) >= Number(created.metadata.resourceVersion));
    await list();
    assert.equal(api.counters.withResourceVersion("list", P, "0"), before.zero + 1);
    assert.equal(api.counters.withResourceVersion("list", P, "unset"), before.unset + 1);
    await c.custom.deleteNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default", name: "l-0" });
  });

  test("fieldSelector metadata.name and labelSelector (=, ==, !=, in, exists); lists of one name counted by it", async () => {
    const before = api.counters.byName("list", P);
    assert.deepEqual(names(await list({ fieldSelector: "metadata.name=l-2" })), ["l-2"]);
    const after = api.counters.byName("list", P);
    assert.equal(after["l-2"], (before["l-2"] ?? 0) + 1);
    assert.equal(after[""] ?? 0, before[""] ?? 0, "not as a list of the collection");
    assert.deepEqual(names(await list({ labelSelector: "tier=gold" })), ["l-1", "l-3"]);
    assert.deepEqual(names(await list({ labelSelector: "tier==silver" })), ["l-2"]);
    assert.deepEqual(names(await list({ labelSelector: "tier!=gold" })), ["l-2"]);
    assert.deepEqual(names(await list({ labelSelector: "tier in (silver,bronze)" })), ["l-2"]);
    assert.deepEqual(names(await list({ labelSelector: "!tier" })), []);
    assert.deepEqual(names(await list({ labelSelector: "tier=gold", fieldSelector: "metadata.name!=l-1" })), ["l-3"]);
  });

  test("a field a real server does not index → 400 BadRequest", async () => {
    const f = await failure(list({ fieldSelector: "spec.driver.name=x" }));
    assert.equal(f.code, 400);
    assert.deepEqual(f.status, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "field label not supported: spec.driver.name",
      reason: "BadRequest",
      code: 400,
    });
  });

  test("limit/continue pages through one snapshot, even when objects change in between", async () => {
    const p1 = await list({ limit: 2 });
    assert.deepEqual(names(p1), ["l-1", "l-2"]);
    assert.equal(p1.metadata.remainingItemCount, 1);
    const token = p1.metadata.continue;
    assert.ok(token);
    await c.custom.deleteNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default", name: "l-3" });
    const p2 = await list({ limit: 2, _continue: token });
    assert.deepEqual(names(p2), ["l-3"]);
    assert.equal(p2.metadata.resourceVersion, p1.metadata.resourceVersion);
    assert.equal(p2.metadata.continue, undefined);
    assert.deepEqual(names(await list()), ["l-1", "l-2"]);
  });

  test("a continue token whose snapshot was compacted → 410 Expired", async () => {
    const p1 = await list({ limit: 1 });
    for (let i = 0; i < 35; i++) await api.create({ apiVersion: "v1", kind: "Secret", metadata: { name: `churn-${i}`, namespace: "default" } });
    const f = await failure(list({ limit: 1, _continue: p1.metadata.continue }));
    assert.equal(f.code, 410);
    assert.equal(f.status.reason, "Expired");
    assert.match(f.status.message!, /^The provided continue parameter is too old/);
  });
});

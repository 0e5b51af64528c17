// Fault injection and request counters, observed the way a client sees them: injected 500/503/429
// Status answers, added latency, the server refusing connections and coming back on the same
// port, and exact per-(verb, resource) counts of what a client sent.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { KubeApi } from "./server.js";
import { type Clients, clients, kubeSuite, cn, csiNode, failure, G, mergePatch, nodesPath, P, recordWatch, upstreamCrdFile, V } from "./testkit.js";
import { waitFor } from "../support/wait.js";

let api: KubeApi;
let c: Clients;
kubeSuite({ crdFiles: [upstreamCrdFile] }, async (k) => {
  ({ api, c } = k);
  await api.create(csiNode("f-1"));
});

describe("faults", () => {
  test("failNext(n, 503, match) fails exactly the next n matching requests with a ServiceUnavailable Status", async () => {
    api.faults.failNext(2, 503, { verb: "get", resource: P });
    await c.core.listNamespace(); // does not match, not consumed
    for (let i = 0; i < 2; i++) {
      const f = await failure(c.custom.getNamespacedCustomObject(cn("f-1")));
      assert.equal(f.code, 503);
      assert.equal(f.status.reason, "ServiceUnavailable");
    }
    await c.custom.getNamespacedCustomObject(cn("f-1"));
  });

  test("429 carries Retry-After and TooManyRequests; 500 matches a path RegExp", async () => {
    api.faults.failNext(1, 429);
    const t = await failure(c.core.listNode());
    assert.deepEqual(t.status, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "Too many requests, please try again later.",
      reason: "TooManyRequests",
      details: { retryAfterSeconds: 1 },
      code: 429,
    });
    api.faults.failNext(1, 500, { path: /\/persistentvolumes$/ });
    await c.core.listNode();
    const e = await failure(c.core.listPersistentVolume());
    assert.equal(e.code, 500);
    assert.equal(e.status.reason, "InternalError");
  });

  test("latency delays matching requests until cleared", async () => {
    api.faults.latency(300, { resource: "nodes" });
    let t0 = Date.now();
    await c.core.listNode();
    assert.ok(Date.now() - t0 >= 290);
    api.faults.clear();
    t0 = Date.now();
    await c.core.listNode();
    assert.ok(Date.now() - t0 < 290);
  });

  test("down() refuses connections (ECONNREFUSED) and ends watches; up() serves again on the same port", async () => {
    const w = await recordWatch(c.watch, nodesPath(), {});
    await waitFor("initial event", () => w.events.length >= 1);
    await api.faults.down();
    await w.ended;
    const err = await c.core.listNamespace().catch((e: unknown) => e);
    assert.match(String((err as Error).message) + String((err as { code?: string }).code), /ECONNREFUSED/);
    await api.faults.up();
    assert.ok((await c.core.listNamespace()).items.length >= 4);
    assert.ok(api.url.endsWith(`:${new URL(api.url).port}`));
  });
});

describe("counters", () => {
  test("count every authenticated request by Kubernetes verb and plural resource", async () => {
    api.counters.reset();
    await c.custom.getNamespacedCustomObject(cn("f-1"));
    await c.custom.listNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default" });
    await c.custom.patchNamespacedCustomObject({ ...cn("f-1"), body: { metadata: { labels: { a: "b" } } } }, mergePatch);
    await c.custom.patchNamespacedCustomObjectStatus({ ...cn("f-1"), body: { status: { state: "x" } } }, mergePatch);
    const w = await recordWatch(c.watch, nodesPath(), { fieldSelector: "metadata.name=f-1" });
    await waitFor("watch event", () => w.events.length >= 1);
    w.abort();
    await c.core.readNamespace({ name: "default" });
    await failure(c.core.readNode({ name: "missing" }));
    assert.deepEqual(api.counters.snapshot(), {
      "get csiaddonsnodes": 1,
      "get namespaces": 1,
      "get nodes": 1,
      "list csiaddonsnodes": 1,
      "patch csiaddonsnodes": 1,
      "patch csiaddonsnodes/status": 1,
      "watch csiaddonsnodes": 1,
    });
    assert.equal(api.counters.get("get", "nodes"), 1);
    assert.equal(api.counters.total({ resource: P }), 4);
    assert.equal(api.counters.total({ verb: "get" }), 3);
    assert.equal(api.counters.total(), 7);
  });

  test("count per authenticated user too, so a controller's requests and its sidecars' are told apart", async () => {
    api.auth.addToken("counted-token", { username: "system:serviceaccount:csi:csi-plugin" });
    const other = clients(api.writeKubeconfig("counted-token", "plugin"));
    api.counters.reset();
    await c.custom.getNamespacedCustomObject(cn("f-1"));
    await other.custom.getNamespacedCustomObject(cn("f-1"));
    await other.core.readNamespace({ name: "default" });
    assert.deepEqual(api.counters.byUser(), {
      "kube:admin": { "get csiaddonsnodes": 1 },
      "system:serviceaccount:csi:csi-plugin": { "get csiaddonsnodes": 1, "get namespaces": 1 },
    });
    assert.equal(api.counters.total(), 3);
    api.counters.reset();
    assert.deepEqual(api.counters.byUser(), {});
  });

  test("direct access bypasses the counters", async () => {
    api.counters.reset();
    await api.create(csiNode("f-2"));
    api.get(`${G}/${V}`, "CSIAddonsNode", "default", "f-2");
    api.list(`${G}/${V}`, "CSIAddonsNode", "default");
    assert.equal(api.counters.total(), 0);
  });
});

// Watch streams through client-node's Watch: event order and types, starting points
// (resourceVersion or none), selectors (including objects leaving a selector), 410 Gone for a
// compacted resourceVersion, timeoutSeconds, and dropped watches.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { KubeApi } from "./server.js";
import { type Clients, kubeSuite, cn, csiNode, G, mergePatch, nodesPath, P, recordWatch, upstreamCrdFile, V } from "./testkit.js";
import { waitFor } from "../support/wait.js";

const HISTORY = 20;
let api: KubeApi;
let c: Clients;
kubeSuite({ crdFiles: [upstreamCrdFile], historySize: HISTORY }, async (k) => {
  ({ api, c } = k);
});

const create = (name: string, labels?: Record<string, string>) => {
  const body = csiNode(name);
  if (labels) body.metadata.labels = labels;
  return c.custom.createNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default", body }) as Promise<any>;
};
const label = (name: string, labels: Record<string, string | null>) =>
  c.custom.patchNamespacedCustomObject({ ...cn(name), body: { metadata: { labels } } }, mergePatch) as Promise<any>;
const listRv = async () =>
  ((await c.custom.listNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default" })) as any).metadata.resourceVersion as string;
const summary = (events: { type: string; object: any }[]) => events.map((e) => `${e.type} ${e.object.metadata?.name}`);

describe("watch", () => {
  test("from a list's resourceVersion: ADDED, MODIFIED, DELETED in order, each with its new resourceVersion", async () => {
    const rv = await listRv();
    const w = await recordWatch(c.watch, nodesPath(), { resourceVersion: rv });
    const a = await create("w-a");
    await label("w-a", { x: "1" });
    await c.custom.deleteNamespacedCustomObject(cn("w-a"));
    await waitFor("three events", () => w.events.length >= 3);
    w.abort();
    assert.deepEqual(summary(w.events), ["ADDED w-a", "MODIFIED w-a", "DELETED w-a"]);
    const rvs = w.events.map((e) => Number(e.object.metadata.resourceVersion));
    assert.ok(rvs[0] === Number(a.metadata.resourceVersion) && rvs[0]! < rvs[1]! && rvs[1]! < rvs[2]!);
    assert.equal(w.events[0]!.object.kind, "CSIAddonsNode");
  });

  test("without a resourceVersion: synthetic ADDED for what exists, then changes", async () => {
    await create("w-b");
    const w = await recordWatch(c.watch, nodesPath(), { fieldSelector: "metadata.name=w-b" });
    await waitFor("initial ADDED", () => w.events.length >= 1);
    await label("w-b", { y: "1" });
    await waitFor("MODIFIED", () => w.events.length >= 2);
    w.abort();
    assert.deepEqual(summary(w.events), ["ADDED w-b", "MODIFIED w-b"]);
  });

  test("resourceVersion=0 with fieldSelector metadata.name: that object's state, then its changes only; counted by name, and by the events sent", async () => {
    await create("w-n");
    const sentToAll = () => Object.values(api.counters.eventsByUser()).reduce((n, byResource) => n + (byResource[P] ?? 0), 0);
    const before = { named: api.counters.byName("watch", P)["w-n"] ?? 0, events: api.counters.events(P), byUser: sentToAll() };
    const w = await recordWatch(c.watch, nodesPath(), { resourceVersion: "0", fieldSelector: "metadata.name=w-n" });
    await waitFor("initial ADDED", () => w.events.length >= 1);
    await create("w-other");
    await label("w-other", { z: "1" });
    await label("w-n", { z: "1" });
    await waitFor("MODIFIED", () => w.events.length >= 2);
    w.abort();
    assert.deepEqual(summary(w.events), ["ADDED w-n", "MODIFIED w-n"]);
    assert.equal(api.counters.byName("watch", P)["w-n"], before.named + 1);
    assert.equal(api.counters.events(P) - before.events, 2, "nothing of w-other was sent");
    assert.equal(sentToAll() - before.byUser, 2, "the events sent are counted for their watcher too");
  });

  test("fieldSelector metadata.name and labelSelector filter; leaving the selector is a DELETED", async () => {
    const rv = await listRv();
    const byName = await recordWatch(c.watch, nodesPath(), { resourceVersion: rv, fieldSelector: "metadata.name=w-c" });
    const byLabel = await recordWatch(c.watch, nodesPath(), { resourceVersion: rv, labelSelector: "tier=gold" });
    await create("w-c");
    await create("w-d", { tier: "gold" });
    await label("w-c", { tier: "gold" });
    await label("w-d", { tier: null });
    await waitFor("events", () => byName.events.length >= 2 && byLabel.events.length >= 3);
    byName.abort();
    byLabel.abort();
    assert.deepEqual(summary(byName.events), ["ADDED w-c", "MODIFIED w-c"]);
    assert.deepEqual(summary(byLabel.events), ["ADDED w-d", "ADDED w-c", "DELETED w-d"]);
  });

  test("a resourceVersion older than the kept history → ERROR event with 410 Expired", async () => {
    await create("w-old");
    const old = await listRv();
    for (let i = 0; i < HISTORY + 5; i++) await label("w-old", { n: String(i) });
    const w = await recordWatch(c.watch, nodesPath(), { resourceVersion: old });
    await w.ended;
    assert.equal(w.events.length, 1);
    assert.equal(w.events[0]!.type, "ERROR");
    assert.deepEqual(w.events[0]!.object, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: w.events[0]!.object.message,
      reason: "Expired",
      code: 410,
    });
    assert.match(w.events[0]!.object.message, new RegExp(`^too old resource version: ${old} \\(\\d+\\)$`));
  });

  test("each resource keeps a history of its own (the API server's watch cache per resource): a flood of writes elsewhere does not expire a watch", async () => {
    await create("w-keep");
    const old = await listRv();
    for (let i = 0; i < HISTORY + 5; i++) await api.create({ apiVersion: "v1", kind: "Secret", metadata: { name: `flood-${i}`, namespace: "default" } });
    const w = await recordWatch(c.watch, nodesPath(), { resourceVersion: old });
    await label("w-keep", { kept: "yes" });
    await waitFor("MODIFIED", () => w.events.length >= 1);
    w.abort();
    assert.deepEqual(summary(w.events), ["MODIFIED w-keep"]);
  });

  test("timeoutSeconds ends the stream", async () => {
    const started = Date.now();
    const w = await recordWatch(c.watch, nodesPath(), { resourceVersion: await listRv(), timeoutSeconds: 1 });
    assert.equal(await w.ended, null);
    assert.ok(Date.now() - started >= 900);
  });

  test("dropWatches ends every open stream; a new watch from the last seen resourceVersion misses nothing", async () => {
    const w = await recordWatch(c.watch, nodesPath(), { resourceVersion: await listRv() });
    await create("w-e");
    await waitFor("ADDED", () => w.events.length >= 1);
    api.faults.dropWatches();
    await w.ended;
    const last = w.events[w.events.length - 1]!.object.metadata.resourceVersion;
    await label("w-e", { after: "drop" });
    const again = await recordWatch(c.watch, nodesPath(), { resourceVersion: last });
    await waitFor("MODIFIED after resume", () => again.events.length >= 1);
    again.abort();
    assert.deepEqual(summary(again.events), ["MODIFIED w-e"]);
  });

  test("core resources watch too (nodes, cluster-scoped)", async () => {
    const list = await c.core.listNode();
    const w = await recordWatch(c.watch, "/api/v1/nodes", { resourceVersion: list.metadata!.resourceVersion! });
    await c.core.createNode({ body: { metadata: { name: "wn-1" } } });
    await waitFor("node ADDED", () => w.events.length >= 1);
    w.abort();
    assert.deepEqual(summary(w.events), ["ADDED wn-1"]);
    assert.equal(w.events[0]!.object.kind, "Node");
  });
});

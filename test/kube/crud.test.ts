// Create/read/update/patch/delete semantics of custom resources, proved over HTTP with
// @kubernetes/client-node: exact status codes and Status objects, resourceVersion, server-set
// metadata, generation, the status subresource and finalizers.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type Clients, kubeSuite, cn, csiNode, failure, G, jsonPatch, mergePatch, P, strategicPatch, upstreamCrdFile, V } from "./testkit.js";

let c: Clients;
kubeSuite({ crdFiles: [upstreamCrdFile] }, async (k) => {
  ({ c } = k);
});

const create = (name: string, ns = "default", driver = {}) =>
  c.custom.createNamespacedCustomObject({ group: G, version: V, plural: P, namespace: ns, body: csiNode(name, ns, driver) }) as Promise<any>;
const get = (name: string, ns = "default") => c.custom.getNamespacedCustomObject(cn(name, ns)) as Promise<any>;
const replace = (obj: any) => c.custom.replaceNamespacedCustomObject({ ...cn(obj.metadata.name, obj.metadata.namespace), body: obj }) as Promise<any>;

describe("create and read", () => {
  test("create sets uid, creationTimestamp, generation 1 and a string resourceVersion", async () => {
    const obj = await create("a1");
    assert.match(obj.metadata.uid, /^[0-9a-f-]{36}$/);
    assert.match(obj.metadata.creationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(obj.metadata.generation, 1);
    assert.equal(typeof obj.metadata.resourceVersion, "string");
    assert.deepEqual(await get("a1"), obj);
  });

  test("client-supplied uid, creationTimestamp and resourceVersion are replaced on create", async () => {
    const body = csiNode("a2");
    body.metadata = { ...body.metadata, uid: "mine", creationTimestamp: "2000-01-01T00:00:00Z", resourceVersion: "999999", generation: 7 };
    const obj: any = await c.custom.createNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default", body });
    assert.notEqual(obj.metadata.uid, "mine");
    assert.notEqual(obj.metadata.creationTimestamp, "2000-01-01T00:00:00Z");
    assert.notEqual(obj.metadata.resourceVersion, "999999");
    assert.equal(obj.metadata.generation, 1);
  });

  test("create of an existing name → 409 AlreadyExists", async () => {
    await create("dup");
    const f = await failure(create("dup"));
    assert.equal(f.code, 409);
    assert.deepEqual(f.status, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'csiaddonsnodes.csiaddons.openshift.io "dup" already exists',
      reason: "AlreadyExists",
      details: { name: "dup", group: G, kind: P },
      code: 409,
    });
  });

  test("get, update and delete of a missing object → 404 NotFound", async () => {
    const expected = {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'csiaddonsnodes.csiaddons.openshift.io "ghost" not found',
      reason: "NotFound",
      details: { name: "ghost", group: G, kind: P },
      code: 404,
    };
    for (const call of [
      get("ghost"),
      replace({ ...csiNode("ghost"), metadata: { name: "ghost", namespace: "default", resourceVersion: "1" } }),
      c.custom.deleteNamespacedCustomObject(cn("ghost")),
    ]) {
      const f = await failure(call);
      assert.equal(f.code, 404);
      assert.deepEqual(f.status, expected);
    }
  });

  test("names must be DNS-1123 subdomains → 422 Invalid naming metadata.name", async () => {
    const f = await failure(create("Bad_Name"));
    assert.equal(f.code, 422);
    assert.equal(f.status.reason, "Invalid");
    assert.deepEqual(
      f.status.details?.causes?.map((x) => [x.reason, x.field]),
      [["FieldValueInvalid", "metadata.name"]],
    );
    assert.match(
      f.status.message!,
      /^CSIAddonsNode\.csiaddons\.openshift\.io "Bad_Name" is invalid: metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain/,
    );
    assert.equal(f.status.details?.kind, "CSIAddonsNode");
  });

  test("create in a namespace that does not exist → 404 for the namespace", async () => {
    const f = await failure(create("x", "nowhere"));
    assert.equal(f.code, 404);
    assert.deepEqual(f.status.details, { name: "nowhere", kind: "namespaces" });
    assert.equal(f.status.message, 'namespaces "nowhere" not found');
  });

  test("generateName gets a random suffix", async () => {
    const body = csiNode("");
    body.metadata = { generateName: "gen-", namespace: "default" };
    const obj: any = await c.custom.createNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default", body });
    assert.match(obj.metadata.name, /^gen-[a-z0-9]{5}$/);
  });

  test("ownerReferences are stored as given and nothing is garbage-collected", async () => {
    const owner = {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      name: "plugin",
      uid: "0b7e1c5e-1111-2222-3333-444444444444",
      controller: true,
      blockOwnerDeletion: true,
    };
    const body = csiNode("owned");
    body.metadata.ownerReferences = [owner];
    await c.custom.createNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default", body });
    assert.deepEqual((await get("owned")).metadata.ownerReferences, [owner]);
  });
});

describe("update", () => {
  test("every write bumps resourceVersion; a stale one → 409 Conflict", async () => {
    const v1 = await create("u1");
    const v2 = await replace({ ...v1, spec: { driver: { ...v1.spec.driver, endpoint: "pod://p.default:1" } } });
    assert.ok(Number(v2.metadata.resourceVersion) > Number(v1.metadata.resourceVersion));
    const f = await failure(replace({ ...v1, spec: { driver: { ...v1.spec.driver, endpoint: "pod://p.default:2" } } }));
    assert.equal(f.code, 409);
    assert.deepEqual(f.status, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message:
        'Operation cannot be fulfilled on csiaddonsnodes.csiaddons.openshift.io "u1": the object has been modified; please apply your changes to the latest version and try again',
      reason: "Conflict",
      details: { name: "u1", group: G, kind: P },
      code: 409,
    });
  });

  test("PUT of a custom resource without metadata.resourceVersion → 422", async () => {
    const v1 = await create("u2");
    delete v1.metadata.resourceVersion;
    const f = await failure(replace(v1));
    assert.equal(f.code, 422);
    assert.deepEqual(f.status, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'CSIAddonsNode.csiaddons.openshift.io "u2" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update',
      reason: "Invalid",
      details: {
        name: "u2",
        group: G,
        kind: "CSIAddonsNode",
        causes: [{ reason: "FieldValueInvalid", message: "Invalid value: 0x0: must be specified for an update", field: "metadata.resourceVersion" }],
      },
      code: 422,
    });
  });

  test("generation bumps on spec changes only; a no-op update writes nothing", async () => {
    const v1 = await create("g1");
    const labelled = await replace({ ...v1, metadata: { ...v1.metadata, labels: { a: "b" } } });
    assert.equal(labelled.metadata.generation, 1);
    const specChanged = await replace({ ...labelled, spec: { driver: { ...v1.spec.driver, endpoint: "pod://p.default:7" } } });
    assert.equal(specChanged.metadata.generation, 2);
    const same = await replace(specChanged);
    assert.equal(same.metadata.resourceVersion, specChanged.metadata.resourceVersion);
  });

  test("uid and creationTimestamp cannot be changed by an update", async () => {
    const v1 = await create("g2");
    const v2 = await replace({ ...v1, metadata: { ...v1.metadata, creationTimestamp: "2001-01-01T00:00:00Z", labels: { x: "y" } } });
    assert.equal(v2.metadata.creationTimestamp, v1.metadata.creationTimestamp);
    const f = await failure(replace({ ...v2, metadata: { ...v2.metadata, uid: "6f1ee9f8-0000-0000-0000-000000000000" } }));
    assert.equal(f.code, 409);
    assert.equal(f.status.reason, "Conflict");
  });

  test("a body whose name differs from the URL → 400 BadRequest", async () => {
    const v1 = await create("n1");
    const f = await failure(c.custom.replaceNamespacedCustomObject({ ...cn("n1"), body: { ...v1, metadata: { ...v1.metadata, name: "n2" } } }));
    assert.equal(f.code, 400);
    assert.equal(f.status.reason, "BadRequest");
    assert.equal(f.status.message, "the name of the object (n2) does not match the name on the URL (n1)");
  });
});

describe("status subresource", () => {
  test("create drops status, main-resource updates ignore it, /status changes only status", async () => {
    const body = csiNode("s1");
    body.status = { state: "Connected" };
    const created: any = await c.custom.createNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default", body });
    assert.equal(created.status, undefined);

    const mainUpdate = await replace({ ...created, status: { state: "Failed" } });
    assert.equal(mainUpdate.status, undefined);

    const viaStatus: any = await c.custom.replaceNamespacedCustomObjectStatus({
      ...cn("s1"),
      body: { ...mainUpdate, spec: { driver: { ...created.spec.driver, endpoint: "pod://changed.default:1" } }, status: { state: "Connected", message: "ok" } },
    });
    assert.deepEqual(viaStatus.status, { state: "Connected", message: "ok" });
    assert.equal(viaStatus.spec.driver.endpoint, created.spec.driver.endpoint);
    assert.equal(viaStatus.metadata.generation, 1);

    const patched: any = await c.custom.patchNamespacedCustomObjectStatus(
      { ...cn("s1"), body: { status: { reason: "Why" }, spec: { driver: { endpoint: "nope" } } } },
      mergePatch,
    );
    assert.deepEqual(patched.status, { state: "Connected", message: "ok", reason: "Why" });
    assert.equal(patched.spec.driver.endpoint, created.spec.driver.endpoint);
  });
});

describe("patch", () => {
  test("merge patch, JSON patch, and 415 for strategic merge on a custom resource", async () => {
    await create("p1");
    const merged: any = await c.custom.patchNamespacedCustomObject({ ...cn("p1"), body: { metadata: { annotations: { k: "v" } } } }, mergePatch);
    assert.equal(merged.metadata.annotations.k, "v");
    const jp: any = await c.custom.patchNamespacedCustomObject(
      { ...cn("p1"), body: [{ op: "replace", path: "/spec/driver/endpoint", value: "pod://j.default:2" }] },
      jsonPatch,
    );
    assert.equal(jp.spec.driver.endpoint, "pod://j.default:2");
    assert.equal(jp.metadata.generation, 2);
    const f = await failure(c.custom.patchNamespacedCustomObject({ ...cn("p1"), body: { metadata: { labels: { a: "b" } } } }, strategicPatch));
    assert.equal(f.code, 415);
    assert.equal(f.status.reason, "UnsupportedMediaType");
  });

  test("a patch carrying a stale resourceVersion → 409 Conflict; a patch of a missing object → 404", async () => {
    const v1 = await create("p2");
    await c.custom.patchNamespacedCustomObject({ ...cn("p2"), body: { metadata: { labels: { a: "1" } } } }, mergePatch);
    const f = await failure(
      c.custom.patchNamespacedCustomObject(
        { ...cn("p2"), body: { metadata: { resourceVersion: v1.metadata.resourceVersion, labels: { a: "2" } } } },
        mergePatch,
      ),
    );
    assert.equal(f.code, 409);
    assert.equal(f.status.reason, "Conflict");
    const g = await failure(c.custom.patchNamespacedCustomObject({ ...cn("p-missing"), body: { metadata: { labels: { a: "2" } } } }, mergePatch));
    assert.equal(g.code, 404);
  });
});

describe("delete and finalizers", () => {
  test("delete without finalizers → 200 Success Status, then 404", async () => {
    const obj = await create("d1");
    const res = await c.custom.deleteNamespacedCustomObject(cn("d1"));
    assert.deepEqual(res, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Success",
      details: { name: "d1", group: G, kind: P, uid: obj.metadata.uid },
    });
    assert.equal((await failure(get("d1"))).code, 404);
    assert.equal((await failure(c.custom.deleteNamespacedCustomObject(cn("d1")))).code, 404);
  });

  test("finalizers: delete marks (200 + deletionTimestamp), object stays readable, removing the last finalizer deletes it", async () => {
    const body = csiNode("f1");
    body.metadata.finalizers = ["csiaddons.openshift.io/csiaddonsnode"];
    await c.custom.createNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default", body });
    const marked: any = await c.custom.deleteNamespacedCustomObject(cn("f1"));
    assert.equal(marked.kind, "CSIAddonsNode");
    assert.match(marked.metadata.deletionTimestamp, /Z$/);
    const still = await get("f1");
    assert.equal(still.metadata.deletionTimestamp, marked.metadata.deletionTimestamp);

    const f = await failure(replace({ ...still, metadata: { ...still.metadata, finalizers: [...still.metadata.finalizers, "example.com/another"] } }));
    assert.equal(f.code, 422);
    assert.equal(f.status.details?.causes?.[0]?.field, "metadata.finalizers");

    await replace({ ...still, metadata: { ...still.metadata, finalizers: [] } });
    assert.equal((await failure(get("f1"))).code, 404);
  });

  test("delete preconditions: a wrong uid → 409 Conflict", async () => {
    await create("d2");
    const f = await failure(c.custom.deleteNamespacedCustomObject({ ...cn("d2"), body: { preconditions: { uid: "00000000-0000-0000-0000-000000000000" } } }));
    assert.equal(f.code, 409);
    assert.match(f.status.message!, /Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000/);
  });
});

// CustomResourceDefinitions: registration through the API (a path exists only while its CRD
// does), openAPIV3Schema validation with exact 422 causes, pruning, the `self == oldSelf`
// immutability rules, and refusal of schema features this server would not enforce. The
// CSIAddonsNode rules run against every CRD the project must satisfy (upstream's and ours).
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import type { KubeApi } from "./server.js";
import { readManifests } from "./seed.js";
import { type Clients, kubeSuite, cn, crdFiles, csiNode, failure, G, P, upstreamCrd, V } from "./testkit.js";

let api: KubeApi;
let c: Clients;
kubeSuite({}, async (k) => {
  ({ api, c } = k);
});

const createNode = (body: any, ns = "default") =>
  c.custom.createNamespacedCustomObject({ group: G, version: V, plural: P, namespace: ns, body }) as Promise<any>;

describe("CRD registration", () => {
  test("the custom resource path is 404 before its CRD, served after, and gone (with its objects) after CRD deletion", async () => {
    const before404 = await failure(c.custom.listNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default" }));
    assert.equal(before404.code, 404);
    assert.deepEqual(before404.status, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "the server could not find the requested resource",
      reason: "NotFound",
      details: {},
      code: 404,
    });

    await c.crds.createCustomResourceDefinition({ body: upstreamCrd() });
    const crd = await c.crds.readCustomResourceDefinition({ name: `${P}.${G}` });
    assert.ok(crd.status?.conditions?.some((x) => x.type === "Established" && x.status === "True"));
    await createNode(csiNode("reg-1"));
    const list: any = await c.custom.listNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default" });
    assert.deepEqual(
      list.items.map((o: any) => o.metadata.name),
      ["reg-1"],
    );
    const groups = await c.crds.getAPIResources();
    assert.ok(groups.resources.some((r) => r.name === "customresourcedefinitions"));

    await c.crds.deleteCustomResourceDefinition({ name: `${P}.${G}` });
    assert.equal((await failure(c.crds.readCustomResourceDefinition({ name: `${P}.${G}` }))).code, 404);
    assert.deepEqual((await failure(c.custom.getNamespacedCustomObject(cn("reg-1")))).status.message, "the server could not find the requested resource");
    // Its objects went with it: a new CRD of the same name starts empty.
    await c.crds.createCustomResourceDefinition({ body: upstreamCrd() });
    const again: any = await c.custom.listNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default" });
    assert.deepEqual(again.items, []);
    await c.crds.deleteCustomResourceDefinition({ name: `${P}.${G}` });
  });

  test("a deleted CRD stays Terminating while one of its objects holds a finalizer, and goes once it is released", async () => {
    await c.crds.createCustomResourceDefinition({ body: upstreamCrd() });
    const held = csiNode("held-1");
    held.metadata.finalizers = ["example.com/hold"];
    await createNode(held);
    await c.crds.deleteCustomResourceDefinition({ name: `${P}.${G}` });
    const terminating = await c.crds.readCustomResourceDefinition({ name: `${P}.${G}` });
    assert.ok(terminating.metadata?.deletionTimestamp, "the CRD waits for its last object");
    const obj: any = await c.custom.getNamespacedCustomObject(cn("held-1"));
    assert.ok(obj.metadata.deletionTimestamp, "the object is being deleted with its CRD");
    await c.custom.replaceNamespacedCustomObject({ ...cn("held-1"), body: { ...obj, metadata: { ...obj.metadata, finalizers: [] } } });
    assert.equal((await failure(c.crds.readCustomResourceDefinition({ name: `${P}.${G}` }))).code, 404);
  });

  test("a CRD with a CEL rule other than self == oldSelf is refused, not silently unenforced", async () => {
    const crd: any = upstreamCrd();
    crd.metadata.name = `widgets.example.com`;
    crd.spec.group = "example.com";
    crd.spec.names = { kind: "Widget", plural: "widgets", singular: "widget", listKind: "WidgetList" };
    crd.spec.versions[0].schema.openAPIV3Schema.properties.spec.x_kubernetes_validations = [{ rule: "self.driver.name.startsWith('a')" }];
    const f = await failure(c.crds.createCustomResourceDefinition({ body: crd }));
    assert.equal(f.code, 422);
    assert.equal(f.status.reason, "Invalid");
    assert.deepEqual(
      f.status.details?.causes?.map((x) => [x.reason, x.field]),
      [["FieldValueForbidden", "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"]],
    );
    assert.match(f.status.message!, /implements only the CEL rule "self == oldSelf"/);
  });

  test("a CRD whose name is not <plural>.<group> or whose schema lacks a type is refused", async () => {
    const crd: any = upstreamCrd();
    crd.metadata.name = "wrong.example.com";
    crd.spec.group = "example.com";
    delete crd.spec.versions[0].schema.openAPIV3Schema.properties.spec.type;
    const f = await failure(c.crds.createCustomResourceDefinition({ body: crd }));
    assert.equal(f.code, 422);
    assert.deepEqual(f.status.details?.causes?.map((x) => [x.reason, x.field]).sort(), [
      ["FieldValueInvalid", "metadata.name"],
      ["FieldValueRequired", "spec.versions[0].schema.openAPIV3Schema.properties[spec].type"],
    ]);
  });
});

describe("schema engine on a CRD using more keywords", () => {
  const widget = (spec: Record<string, unknown>, name = "w") => ({
    apiVersion: "example.com/v1",
    kind: "Widget",
    metadata: { name, namespace: "default" },
    spec,
  });
  const createWidget = (body: unknown) =>
    c.custom.createNamespacedCustomObject({ group: "example.com", version: "v1", plural: "widgets", namespace: "default", body }) as Promise<any>;
  before(async () => {
    await api.create({
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "widgets.example.com" },
      spec: {
        group: "example.com",
        scope: "Namespaced",
        names: { kind: "Widget", plural: "widgets" },
        versions: [
          {
            name: "v1",
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: "object",
                properties: {
                  spec: {
                    type: "object",
                    properties: {
                      size: { type: "string", enum: ["S", "M", "L"], default: "M" },
                      port: { "x-kubernetes-int-or-string": true },
                      label: { type: "string", pattern: "^[a-z]+$", maxLength: 8 },
                      free: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
                      note: { type: "string", nullable: true },
                      ports: {
                        type: "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        items: {
                          type: "object",
                          required: ["name"],
                          properties: {
                            name: { type: "string" },
                            number: { type: "integer", minimum: 1, "x-kubernetes-validations": [{ rule: "self == oldSelf", message: "number is fixed" }] },
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        ],
      },
    });
  });

  test("defaults, preserve-unknown-fields, nullable and int-or-string are applied", async () => {
    const w = await createWidget(widget({ port: "http", free: { any: { thing: 1 } }, note: null }));
    assert.deepEqual(w.spec, { size: "M", port: "http", free: { any: { thing: 1 } }, note: null });
  });

  test("enum, pattern, maxLength, minimum and list-map duplicates → 422 with one cause each", async () => {
    const f = await failure(
      createWidget(
        widget(
          {
            size: "XL",
            label: "Abc123456",
            ports: [
              { name: "a", number: 0 },
              { name: "a", number: 2 },
            ],
          },
          "w-bad",
        ),
      ),
    );
    assert.equal(f.code, 422);
    assert.deepEqual(
      f.status.details?.causes?.map((x) => [x.reason, x.field]),
      [
        ["FieldValueNotSupported", "spec.size"],
        ["FieldValueTooLong", "spec.label"],
        ["FieldValueInvalid", "spec.label"],
        ["FieldValueDuplicate", "spec.ports[1]"],
        ["FieldValueInvalid", "spec.ports[0].number"],
      ],
    );
  });

  test("a transition rule inside a list-type=map item compares the item with the same key", async () => {
    const w = await createWidget(widget({ ports: [{ name: "a", number: 1 }] }, "w-ports"));
    const added: any = await c.custom.replaceNamespacedCustomObject({
      group: "example.com",
      version: "v1",
      plural: "widgets",
      namespace: "default",
      name: "w-ports",
      body: {
        ...w,
        spec: {
          ...w.spec,
          ports: [
            { name: "b", number: 5 },
            { name: "a", number: 1 },
          ],
        },
      },
    });
    const f = await failure(
      c.custom.replaceNamespacedCustomObject({
        group: "example.com",
        version: "v1",
        plural: "widgets",
        namespace: "default",
        name: "w-ports",
        body: { ...added, spec: { ...added.spec, ports: [{ name: "a", number: 2 }] } },
      }),
    );
    assert.equal(f.code, 422);
    assert.deepEqual(f.status.details?.causes, [
      { reason: "FieldValueInvalid", message: 'Invalid value: "integer": number is fixed', field: "spec.ports[0].number" },
    ]);
  });
});

for (const file of crdFiles) {
  describe(`CSIAddonsNode against ${file.split("/").slice(-2).join("/")}`, () => {
    const ns = `ns-${crdFiles.indexOf(file)}`;
    before(async () => {
      for (const crd of readManifests(file)) {
        const name = (crd.metadata as any).name;
        if (!api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", undefined, name)) await api.create(crd);
      }
      if (!api.get("v1", "Namespace", undefined, ns)) await api.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    });

    test("a missing required field → 422 Invalid with the field path", async () => {
      const body = csiNode("req-1", ns);
      delete body.spec.driver.nodeID;
      const f = await failure(createNode(body, ns));
      assert.equal(f.code, 422);
      assert.deepEqual(f.status, {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: 'CSIAddonsNode.csiaddons.openshift.io "req-1" is invalid: spec.driver.nodeID: Required value',
        reason: "Invalid",
        details: {
          name: "req-1",
          group: G,
          kind: "CSIAddonsNode",
          causes: [{ reason: "FieldValueRequired", message: "Required value", field: "spec.driver.nodeID" }],
        },
        code: 422,
      });
    });

    test("a wrong type → 422 FieldValueTypeInvalid", async () => {
      const f = await failure(createNode(csiNode("type-1", ns, { name: 42 }), ns));
      assert.equal(f.code, 422);
      assert.deepEqual(f.status.details?.causes, [
        {
          reason: "FieldValueTypeInvalid",
          message: 'Invalid value: "integer": spec.driver.name in body must be of type string: "integer"',
          field: "spec.driver.name",
        },
      ]);
    });

    test("unknown fields are pruned (and refused with fieldValidation=Strict)", async () => {
      const body = csiNode("prune-1", ns);
      body.spec.extra = "x";
      body.spec.driver.port = 9;
      body.topLevel = true;
      const created = await createNode(body, ns);
      assert.equal(created.spec.extra, undefined);
      assert.equal(created.spec.driver.port, undefined);
      assert.equal(created.topLevel, undefined);
      const f = await failure(
        c.custom.createNamespacedCustomObject({
          group: G,
          version: V,
          plural: P,
          namespace: ns,
          body: { ...body, metadata: { name: "prune-2", namespace: ns } },
          fieldValidation: "Strict",
        }),
      );
      assert.equal(f.code, 400);
      assert.equal(f.status.reason, "BadRequest");
      assert.equal(f.status.message, 'strict decoding error: unknown field "spec.driver.port", unknown field "spec.extra", unknown field "topLevel"');
    });

    test("spec.driver.name and spec.driver.nodeID are immutable (self == oldSelf) → 422; the endpoint may change", async () => {
      const created = await createNode(csiNode("imm-1", ns), ns);
      const moved: any = await c.custom.replaceNamespacedCustomObject({
        ...cn("imm-1", ns),
        body: { ...created, spec: { driver: { ...created.spec.driver, endpoint: "pod://other.default:1" } } },
      });
      for (const [field, message] of [
        ["name", "name is immutable"],
        ["nodeID", "nodeID is immutable"],
      ] as const) {
        const f = await failure(
          c.custom.replaceNamespacedCustomObject({ ...cn("imm-1", ns), body: { ...moved, spec: { driver: { ...moved.spec.driver, [field]: "changed" } } } }),
        );
        assert.equal(f.code, 422);
        assert.deepEqual(f.status.details?.causes, [
          { reason: "FieldValueInvalid", message: `Invalid value: "string": ${message}`, field: `spec.driver.${field}` },
        ]);
      }
    });
  });
}

// Authentication (401), RBAC-like authorization (403 with the real message), TokenReview and
// SubjectAccessReview answered from the token table and allow rules — all over HTTP.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ApiException } from "@kubernetes/client-node";
import { KUBE_API_AUDIENCE } from "./auth.js";
import type { KubeApi } from "./server.js";
import { type Clients, clients, kubeSuite, cn, csiNode, failure, G, P, upstreamCrdFile, V } from "./testkit.js";

let api: KubeApi;
let admin: Clients;
let user: Clients;
kubeSuite({ crdFiles: [upstreamCrdFile], requireRbac: true }, async (k) => {
  ({ api, c: admin } = k);
  api.auth.addToken("user-token", { username: "alice", uid: "u-1", groups: ["team"] });
  api.auth.addToken("sidecar-token", { username: "system:serviceaccount:csi:healer", groups: ["system:serviceaccounts"], audiences: [KUBE_API_AUDIENCE] });
  api.auth.addToken("caller-token", { username: "controller", audiences: ["csi-addons"] });
  api.auth.addToken("old-token", { username: "bob", expired: true });
  api.auth.addToken("multi-token", { username: "carol", audiences: ["csi-addons", "healer"] });
  api.auth.addToken("bound-token", { username: "dave", audiences: ["csi-addons"], extra: { "authentication.kubernetes.io/pod-uid": ["p-1"] } });
  user = clients(api.writeKubeconfig("user-token", "alice"));
  await api.create(csiNode("existing"));
});

describe("authentication", () => {
  test("an unknown token → 401 Unauthorized Status (and it is not counted)", async () => {
    api.counters.reset();
    const stranger = clients(api.writeKubeconfig("no-such-token", "stranger"));
    const err = await stranger.core.listNamespace().catch((e: unknown) => e);
    assert.ok(err instanceof ApiException);
    assert.equal(err.code, 401);
    // client-node drops 401 bodies; read the Status itself.
    const opts = await stranger.kc.applyToFetchOptions({});
    const { default: fetch } = await import("node-fetch");
    const res = await fetch(`${api.url}/api/v1/namespaces`, opts as object);
    assert.equal(res.status, 401);
    assert.deepEqual(await res.json(), {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "Unauthorized",
      reason: "Unauthorized",
      code: 401,
    });
    assert.equal(api.counters.total(), 0);
  });

  test("an expired token, or one bound to another audience, cannot call the API server", async () => {
    for (const token of ["old-token", "caller-token"]) {
      const err = await clients(api.writeKubeconfig(token))
        .core.listNamespace()
        .catch((e: unknown) => e);
      assert.equal((err as ApiException<unknown>).code, 401);
    }
  });
});

describe("authorization (requireRbac)", () => {
  test("a verb not allowed → 403 Forbidden with the real message, namespaced and cluster-scoped", async () => {
    const f = await failure(user.custom.replaceNamespacedCustomObject({ ...cn("existing"), body: csiNode("existing") }));
    assert.equal(f.code, 403);
    assert.deepEqual(f.status, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message:
        'csiaddonsnodes.csiaddons.openshift.io "existing" is forbidden: User "alice" cannot update resource "csiaddonsnodes" in API group "csiaddons.openshift.io" in the namespace "default"',
      reason: "Forbidden",
      details: { name: "existing", group: G, kind: P },
      code: 403,
    });
    const nodes = await failure(user.core.listNode());
    assert.equal(nodes.status.message, 'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope');
    const status = await failure(user.custom.patchNamespacedCustomObjectStatus({ ...cn("existing"), body: [] }));
    assert.match(status.status.message!, /cannot patch resource "csiaddonsnodes\/status" in API group "csiaddons.openshift.io"/);
  });

  test("allow rules grant exactly their verbs, groups, resources, names and namespace", async () => {
    api.auth.allow("alice", { verbs: ["get"], apiGroups: [G], resources: [P], resourceNames: ["existing"], namespace: "default" });
    api.auth.allow("team", { verbs: ["get", "watch"], apiGroups: [""], resources: ["nodes"], resourceNames: ["n1"] });
    try {
      await user.custom.getNamespacedCustomObject(cn("existing"));
      assert.equal((await failure(user.custom.getNamespacedCustomObject(cn("other")))).code, 403);
      assert.equal((await failure(user.custom.listNamespacedCustomObject({ group: G, version: V, plural: P, namespace: "default" }))).code, 403);
      // A rule bound to one of the user's groups applies too; the name check covers list/watch narrowed by metadata.name.
      assert.equal((await failure(user.core.readNode({ name: "n1" }))).code, 404);
      assert.equal((await failure(user.core.readNode({ name: "n2" }))).code, 403);
    } finally {
      api.auth.clearRules("alice");
      api.auth.clearRules("team");
    }
    assert.equal((await failure(user.custom.getNamespacedCustomObject(cn("existing")))).code, 403);
  });

  test("discovery is open to every authenticated user", async () => {
    const v = await user.core.getAPIResources();
    assert.ok(v.resources.length > 0);
  });
});

describe("TokenReview", () => {
  const review = (token: string, audiences?: string[]) =>
    admin.authn.createTokenReview({ body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token, audiences } } });

  test("a known token → authenticated with user, groups and audiences (201)", async () => {
    const r = await review("caller-token", ["csi-addons"]);
    assert.equal(r.status?.authenticated, true);
    assert.deepEqual({ ...r.status?.user }, { username: "controller", groups: ["system:authenticated"] });
    assert.deepEqual(r.status?.audiences, ["csi-addons"]);
    const legacy = await review("user-token");
    assert.deepEqual({ ...legacy.status?.user }, { username: "alice", uid: "u-1", groups: ["team", "system:authenticated"] });
  });

  test("the user's extra (a bound token's pod) is in the review's user", async () => {
    const r = await review("bound-token", ["csi-addons"]);
    assert.deepEqual({ ...r.status?.user }.extra, { "authentication.kubernetes.io/pod-uid": ["p-1"] });
    assert.equal({ ...(await review("caller-token", ["csi-addons"])).status?.user }.extra, undefined, "none without one");
  });

  test("with spec.audiences: authenticated for the intersection with the token's audiences, else not at all", async () => {
    const both = await review("multi-token", ["other", "csi-addons", "healer"]);
    assert.equal(both.status?.authenticated, true);
    assert.deepEqual(both.status?.audiences, ["csi-addons", "healer"]);
    const none = await review("multi-token", ["other"]);
    assert.equal(none.status?.authenticated, false);
    assert.match(none.status?.error ?? "", /token audiences \["csi-addons","healer"\] is invalid for the target audiences \["other"\]/);
    // The API server's audience is not implied once audiences are named.
    assert.equal((await review("sidecar-token", ["csi-addons"])).status?.authenticated, false);
  });

  test("without spec.audiences: the API server's own audiences, which a token without audiences also has", async () => {
    const sa = await review("sidecar-token");
    assert.equal(sa.status?.authenticated, true);
    assert.deepEqual(sa.status?.audiences, [KUBE_API_AUDIENCE]);
    const legacy = await review("user-token");
    assert.equal(legacy.status?.authenticated, true);
    assert.deepEqual(legacy.status?.audiences, [KUBE_API_AUDIENCE]);
    // A token bound to other audiences only is not the API server's.
    assert.equal((await review("caller-token")).status?.authenticated, false);
    // Asking for the API server's audience by name is the same question.
    assert.equal((await review("sidecar-token", [KUBE_API_AUDIENCE])).status?.authenticated, true);
  });

  test("unknown, expired and wrong-audience tokens → 201 with authenticated: false, never an HTTP error", async () => {
    const cases = [
      ["nope", undefined],
      ["old-token", undefined],
      ["caller-token", ["other"]],
      ["caller-token", undefined],
      ["user-token", ["anything"]],
    ] as const;
    for (const [token, aud] of cases) {
      const r = await review(token, aud as string[] | undefined);
      assert.equal(r.status?.authenticated, false, token);
      assert.ok(r.status?.error, token);
    }
  });

  test("creating reviews needs permission when RBAC is on", async () => {
    const f = await failure(user.authn.createTokenReview({ body: { spec: { token: "x" } } }));
    assert.equal(f.code, 403);
    assert.equal(
      f.status.message,
      'tokenreviews.authentication.k8s.io is forbidden: User "alice" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope',
    );
  });
});

describe("SubjectAccessReview", () => {
  const sar = (userName: string, groups: string[], attrs: Record<string, string>) =>
    admin.authz.createSubjectAccessReview({
      body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec: { user: userName, groups, resourceAttributes: attrs } },
    });

  test("answers from the allow rules, for the user and for its groups", async () => {
    api.auth.allow("controller", { verbs: ["create"], apiGroups: [G], resources: [`${P}/heal`] });
    api.auth.allow("healers", { verbs: ["get"], apiGroups: [G], resources: [P], namespace: "csi" });
    try {
      const attrs = { namespace: "csi", verb: "create", group: G, resource: P, subresource: "heal", name: "n" };
      assert.equal((await sar("controller", [], attrs)).status?.allowed, true);
      assert.equal((await sar("mallory", [], attrs)).status?.allowed, false);
      assert.equal((await sar("mallory", ["healers"], { namespace: "csi", verb: "get", group: G, resource: P })).status?.allowed, true);
      assert.equal((await sar("mallory", ["healers"], { namespace: "default", verb: "get", group: G, resource: P })).status?.allowed, false);
    } finally {
      api.auth.clearRules();
    }
  });

  test("a rule that reads the user's extra (an authorizer beside RBAC) grants only to a review whose spec.extra holds it", async () => {
    api.auth.allow("scoped", { verbs: ["call"], apiGroups: [G], resources: [`${P}/heal`], extra: { scope: "heal" } });
    try {
      const spec = (extra?: Record<string, string[]>) => ({
        user: "scoped",
        ...(extra ? { extra } : {}),
        resourceAttributes: { namespace: "csi", verb: "call", group: G, resource: P, subresource: "heal" },
      });
      const allowed = async (extra?: Record<string, string[]>) =>
        (await admin.authz.createSubjectAccessReview({ body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec: spec(extra) } }))
          .status?.allowed;
      assert.equal(await allowed({ scope: ["heal"] }), true);
      assert.equal(await allowed({ scope: ["read"] }), false);
      assert.equal(await allowed(), false, "without the extra the rule does not apply");
    } finally {
      api.auth.clearRules();
    }
  });

  test("a review without attributes or user → 422 Invalid", async () => {
    const f = await failure(admin.authz.createSubjectAccessReview({ body: { spec: { user: "x" } } }));
    assert.equal(f.code, 422);
    assert.equal(f.status.details?.causes?.[0]?.field, "spec.resourceAttributes");
  });
});

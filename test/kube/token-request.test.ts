// TokenRequest (serviceaccounts/{name}/token) as the real API server answers it, and the tokens it
// issues as TokenReview and the server itself then see them: the ServiceAccount's user, only the
// requested audiences, refused once expired or once the ServiceAccount is gone. RBAC on the
// subresource, with resourceNames, as a controller allowed to mint tokens for itself only is granted.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { KUBE_API_AUDIENCE } from "./auth.js";
import type { KubeApi } from "./server.js";
import { type Clients, clients, failure, G, kubeSuite, P } from "./testkit.js";
import { waitFor } from "../support/wait.js";

let api: KubeApi;
let admin: Clients;
const sa = (name: string, namespace = "csi") => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace } });
kubeSuite({ requireRbac: true, seed: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "csi" } }] }, async (k) => {
  ({ api, c: admin } = k);
  await admin.core.createNamespacedServiceAccount({ namespace: "csi", body: sa("healer") });
  await admin.core.createNamespacedServiceAccount({ namespace: "csi", body: sa("other") });
});

const request = (c: Clients, name: string, spec: { audiences?: string[]; expirationSeconds?: number }) =>
  c.core
    .createNamespacedServiceAccountToken({
      namespace: "csi",
      name,
      body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: spec as never },
    })
    .then((r) => ({ spec: r.spec, status: r.status! }));
const review = (token: string, audiences?: string[]) =>
  admin.authn.createTokenReview({ body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token, audiences } } });

describe("TokenRequest", () => {
  test("a token for the asked audiences only, as the ServiceAccount's user, with its expiration", async () => {
    const before = Date.now();
    const tr = await request(admin, "healer", { audiences: ["csi-addons-healer/node-a"], expirationSeconds: 600 });
    assert.ok(tr.status.token);
    assert.deepEqual(tr.spec.audiences, ["csi-addons-healer/node-a"]);
    const expires = new Date(tr.status.expirationTimestamp).getTime();
    assert.ok(expires >= before + 599_000 && expires <= Date.now() + 600_000, String(tr.status.expirationTimestamp));
    const r = await review(tr.status.token, ["csi-addons-healer/node-a", "csi-addons-healer/node-b"]);
    assert.equal(r.status?.authenticated, true);
    assert.deepEqual(r.status?.audiences, ["csi-addons-healer/node-a"]);
    assert.equal(r.status?.user?.username, "system:serviceaccount:csi:healer");
    assert.deepEqual(r.status?.user?.groups, ["system:serviceaccounts", "system:serviceaccounts:csi", "system:authenticated"]);
    // Another node's audience, and the API server's, are not this token's.
    assert.equal((await review(tr.status.token, ["csi-addons-healer/node-b"])).status?.authenticated, false);
    assert.equal((await review(tr.status.token)).status?.authenticated, false);
  });

  test("no audiences: the API server's; no expirationSeconds: one hour", async () => {
    const tr = await request(admin, "healer", {});
    assert.deepEqual(tr.spec.audiences, [KUBE_API_AUDIENCE]);
    assert.equal(tr.spec.expirationSeconds, 3600);
    assert.equal((await review(tr.status.token)).status?.authenticated, true);
    // The API server itself takes it.
    await clients(api.writeKubeconfig(tr.status.token)).core.getAPIResources();
  });

  test("invalid lifetimes → 422 with the real message; a missing ServiceAccount → 404", async () => {
    const short = await failure(request(admin, "healer", { expirationSeconds: 599 }));
    assert.equal(short.code, 422);
    assert.equal(short.status.details?.causes?.[0]?.field, "spec.expirationSeconds");
    assert.match(short.status.details?.causes?.[0]?.message ?? "", /may not specify a duration less than 10 minutes/);
    assert.equal((await failure(request(admin, "nobody", {}))).code, 404);
  });

  test("the server's maximum lifetime caps the token, reported in expirationTimestamp; then it is refused", async () => {
    api.auth.setMaxTokenExpiration(1);
    try {
      const tr = await request(admin, "healer", { audiences: ["x"], expirationSeconds: 3600 });
      assert.equal(tr.spec.expirationSeconds, 1);
      assert.ok(new Date(tr.status.expirationTimestamp).getTime() <= Date.now() + 1000);
      assert.equal((await review(tr.status.token, ["x"])).status?.authenticated, true);
      await waitFor("the token to expire", async () => (await review(tr.status.token, ["x"])).status?.error === "token has expired", { timeoutMs: 5000 });
    } finally {
      api.auth.setMaxTokenExpiration(undefined);
    }
  });

  test("a token stops authenticating when its ServiceAccount is deleted, and a new one of that name does not revive it", async () => {
    await admin.core.createNamespacedServiceAccount({ namespace: "csi", body: sa("short-lived") });
    const tr = await request(admin, "short-lived", { audiences: ["x"] });
    await admin.core.deleteNamespacedServiceAccount({ namespace: "csi", name: "short-lived" });
    await admin.core.createNamespacedServiceAccount({ namespace: "csi", body: sa("short-lived") });
    const r = await review(tr.status.token, ["x"]);
    assert.equal(r.status?.authenticated, false);
    assert.match(r.status?.error ?? "", /no longer exists/);
  });

  test("RBAC: create serviceaccounts/token, narrowed by resourceNames to one ServiceAccount", async () => {
    const own = await request(admin, "healer", {});
    const healer = clients(api.writeKubeconfig(own.status.token));
    assert.equal((await failure(request(healer, "healer", { audiences: ["x"] }))).code, 403);
    api.auth.allow("system:serviceaccount:csi:healer", {
      verbs: ["create"],
      apiGroups: [""],
      resources: ["serviceaccounts/token"],
      resourceNames: ["healer"],
      namespace: "csi",
    });
    try {
      assert.ok((await request(healer, "healer", { audiences: ["x"] })).status.token);
      const f = await failure(request(healer, "other", { audiences: ["x"] }));
      assert.equal(f.code, 403);
      assert.match(f.status.message!, /cannot create resource "serviceaccounts\/token" in API group "" in the namespace "csi"/);
    } finally {
      api.auth.clearRules("system:serviceaccount:csi:healer");
    }
  });

  test("RBAC on subresources: a resource never covers its subresources; x/* and */sub do", async () => {
    const sar = (attrs: Record<string, string>) =>
      admin.authz.createSubjectAccessReview({
        body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec: { user: "u", resourceAttributes: attrs } },
      });
    const heal = { namespace: "csi", verb: "call", group: G, resource: P, subresource: "heal", name: "n1" };
    api.auth.allow("u", { verbs: ["call"], apiGroups: [G], resources: [P] });
    assert.equal((await sar(heal)).status?.allowed, false);
    api.auth.clearRules("u");
    for (const resources of [[`${P}/heal`], [`${P}/*`], ["*/heal"]]) {
      api.auth.allow("u", { verbs: ["call"], apiGroups: [G], resources });
      assert.equal((await sar(heal)).status?.allowed, true, resources[0]);
      assert.equal((await sar({ ...heal, subresource: "networkfence" })).status?.allowed, resources[0] === `${P}/*`, resources[0]);
      api.auth.clearRules("u");
    }
    api.auth.allow("u", { verbs: ["call"], apiGroups: [G], resources: [`${P}/heal`], resourceNames: ["n2"] });
    assert.equal((await sar(heal)).status?.allowed, false);
    assert.equal((await sar({ ...heal, name: "n2" })).status?.allowed, true);
    api.auth.clearRules("u");
  });
});

// How the sidecar reads the API's answers about a caller. A TokenReview: only `authenticated: true`
// with a username is a caller, whatever else the answer holds (a webhook authenticator may add a
// user to a refusal), and an answer for other audiences (or, asked for ours, for none) is not
// ours. A SubjectAccessReview: only `allowed: true` allows. Against a server that answers as told.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi } from "../../../../sidecar/kube/api.js";
import { createKubeApi } from "../../../../sidecar/kube/client.js";
import { answeringApi } from "../../../support/answering-api.js";

async function reviewServer(t: TestContext): Promise<{ kube: KubeApi; answer: (status: unknown) => void }> {
  let status: unknown;
  const transport = await answeringApi(t, () => ({ status: 201, body: JSON.stringify({ status }) }));
  return { kube: createKubeApi(transport), answer: (s) => (status = s) };
}

test("TokenReview answers: a caller only when authenticated with a username, for one of our audiences", async (t) => {
  const { kube, answer } = await reviewServer(t);
  const review = (status: unknown) => (answer(status), kube.reviewToken("caller-token", ["csi-addons"], AbortSignal.timeout(5_000)));

  const user = { username: "system:serviceaccount:csi-addons-system:csi-addons-controller-manager", uid: "u-1", groups: ["system:serviceaccounts"] };
  assert.deepEqual(await review({ authenticated: true, user, audiences: ["csi-addons"] }), user);
  assert.equal(await review({ authenticated: true, user }), undefined, "no audiences in the answer: valid for the API server's audience, not ours");
  assert.equal(await review({ authenticated: true, user, audiences: [] }), undefined, "the same, said with an empty list");
  assert.equal(await review({ authenticated: false, user }), undefined, "a refusal that names a user is still a refusal");
  assert.equal(await review({ user }), undefined, "no verdict is a refusal");
  assert.equal(await review({ authenticated: true, user: { uid: "u-1" } }), undefined, "authenticated, but as nobody");
  assert.equal(await review({ authenticated: true, user, audiences: ["https://kubernetes.default.svc"] }), undefined, "a token for other audiences");
  assert.equal(await review(undefined), undefined, "no status at all");

  // Reviewed for the API server's own audiences (no spec.audiences), an answer without audiences is one.
  answer({ authenticated: true, user });
  assert.deepEqual(await kube.reviewToken("caller-token", undefined, AbortSignal.timeout(5_000)), user);
});

test("SubjectAccessReview answers: allowed only when the answer says allowed: true", async (t) => {
  const { kube, answer } = await reviewServer(t);
  const user = { username: "system:serviceaccount:csi-addons-system:csi-addons-controller-manager", uid: "u-1", groups: [] };
  const attrs = { namespace: "csi", verb: "call", group: "csiaddons.openshift.io", resource: "csiaddonsnodes" };
  const review = (status: unknown) => (answer(status), kube.reviewAccess(user, attrs, AbortSignal.timeout(5_000)));
  assert.equal(await review({ allowed: true }), true);
  assert.equal(await review({ allowed: false, denied: true, reason: "no RBAC rule" }), false);
  assert.equal(await review({ allowed: false }), false);
  assert.equal(await review({}), false, "no verdict is a refusal");
  assert.equal(await review(undefined), false, "no status at all");
});

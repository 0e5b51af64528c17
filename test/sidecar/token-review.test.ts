// How the sidecar reads a TokenReview's answer: only `authenticated: true` with a username is a
// caller, whatever else the answer holds (a webhook authenticator may add a user to a refusal),
// and an answer for other audiences is not ours. Against a server that answers as told.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createKubeApi } from "../../sidecar/kube/client.js";
import { KubeTransport } from "../../sidecar/kube/transport.js";

test("TokenReview answers: a caller only when authenticated with a username, for one of our audiences", async (t) => {
  let status: unknown;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(201, { "content-type": "application/json" });
      res.end(JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", status }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  const transport = new KubeTransport({ server: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`), token: () => "sidecar" });
  t.after(() => transport.close());
  const kube = createKubeApi(transport);
  const review = (answer: unknown) => ((status = answer), kube.reviewToken("caller-token", ["csi-addons"], AbortSignal.timeout(5_000)));

  const user = { username: "system:serviceaccount:csi-addons-system:csi-addons-controller-manager", uid: "u-1", groups: ["system:serviceaccounts"] };
  assert.deepEqual(await review({ authenticated: true, user, audiences: ["csi-addons"] }), user);
  assert.deepEqual(await review({ authenticated: true, user }), user, "an authenticator that does not echo audiences");
  assert.equal(await review({ authenticated: false, user }), undefined, "a refusal that names a user is still a refusal");
  assert.equal(await review({ user }), undefined, "no verdict is a refusal");
  assert.equal(await review({ authenticated: true, user: { uid: "u-1" } }), undefined, "authenticated, but as nobody");
  assert.equal(await review({ authenticated: true, user, audiences: ["https://kubernetes.default.svc"] }), undefined, "a token for other audiences");
  assert.equal(await review(undefined), undefined, "no status at all");
});

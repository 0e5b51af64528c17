// kube/status-text: what a refused request says of itself. The API server's Status message when
// there is one (it names the verb, resource and identity of a 403), never the rest of the answer,
// and nothing made up when the body is something else (a proxy's error page, an empty body).
import { test } from "node:test";
import assert from "node:assert/strict";
import { httpStatusText } from "../../../../controller/kube/status-text.js";

test("a refusal is its HTTP status, and the message of the Status the API server answered with", () => {
  const forbidden = {
    kind: "Status",
    apiVersion: "v1",
    status: "Failure",
    reason: "Forbidden",
    code: 403,
    message: 'events is forbidden: User "x" cannot create resource "events"',
  };
  assert.equal(httpStatusText(403, JSON.stringify(forbidden)), 'HTTP 403: events is forbidden: User "x" cannot create resource "events"');
  assert.equal(httpStatusText(403, forbidden), 'HTTP 403: events is forbidden: User "x" cannot create resource "events"', "a body already parsed");
  // Bodies without a Status message: the status alone.
  for (const body of [
    JSON.stringify({ kind: "Status", code: 500 }),
    JSON.stringify({ kind: "Status", code: 500, message: "" }),
    JSON.stringify({ kind: "Pod", message: "not a Status" }),
    "<html><body>502 Bad Gateway</body></html>",
    "",
    "null",
    undefined,
  ])
    assert.equal(httpStatusText(502, body), "HTTP 502", String(body));
});

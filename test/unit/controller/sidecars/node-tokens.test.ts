import assert from "node:assert/strict";
import { test } from "node:test";
import { NodeTokens } from "../../../../controller/sidecars/node-tokens.js";

/** A TokenRequest API whose answers the test releases; records what was asked and the most at once. */
function fakeApi() {
  const asked: string[] = [];
  const open: (() => void)[] = [];
  let peak = 0;
  return {
    asked,
    peak: () => peak,
    answerAll: () => open.splice(0).forEach((r) => r()),
    pending: () => open.length,
    kube: {
      requestToken(_ns: string, _name: string, audiences: string[]) {
        asked.push(audiences[0]!);
        return new Promise<{ token: string; expiresAtMs: number }>((resolve) => {
          open.push(() => resolve({ token: `t-${audiences[0]}`, expiresAtMs: Date.now() + 3_600_000 }));
          peak = Math.max(peak, open.length);
        });
      },
    },
  };
}

test("a controller that sees every node at once asks a few tokens at a time, one per node, and every caller gets its node's", async () => {
  const api = fakeApi();
  const tokens = new NodeTokens(api.kube, { namespace: "ns", name: "sa" });
  const nodes = Array.from({ length: 100 }, (_, i) => `node-${i}`);
  const all = Promise.all([...nodes, ...nodes].map((n) => tokens.get(n)));
  for (let rounds = 0; api.asked.length < nodes.length || api.pending() > 0; rounds++) {
    assert.ok(rounds < 1000, "every request was sent and answered");
    await new Promise((r) => setImmediate(r));
    api.answerAll();
  }
  const got = await all;
  assert.deepEqual(
    got,
    [...nodes, ...nodes].map((n) => `t-csi-addons-healer/${n}`),
  );
  assert.equal(api.asked.length, 100, "one TokenRequest per node, shared by its callers");
  assert.equal(api.peak(), 8, "at most 8 in flight");
});

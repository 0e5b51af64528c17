// SecretCache against a scripted Kubernetes API: what it keeps, and which signal a read carries.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SecretCache } from "../../../../sidecar/relay/secret-cache.js";
import type { KubeApi } from "../../../../sidecar/kube/api.js";

test("SecretCache: a Secret found absent is read again on the next lookup; a found one is kept", async () => {
  const answers: (Record<string, string> | undefined)[] = [undefined, { userKey: "k" }];
  let reads = 0;
  const kube = { getSecretData: async () => answers[Math.min(reads++, answers.length - 1)] } as unknown as KubeApi;
  const secrets = new SecretCache(kube, 60_000);
  assert.equal(await secrets.get("ns", "s"), undefined);
  assert.deepEqual(await secrets.get("ns", "s"), { userKey: "k" }, "created since: seen at once");
  assert.deepEqual(await secrets.get("ns", "s"), { userKey: "k" });
  assert.equal(reads, 2);
});

test("SecretCache: a caller's cancellation reaches the read it alone waits for", async () => {
  const signals: AbortSignal[] = [];
  const kube = {
    getSecretData: (_ns: string, _name: string, signal: AbortSignal) =>
      new Promise((_resolve, reject) => {
        signals.push(signal);
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      }),
  } as unknown as KubeApi;
  const secrets = new SecretCache(kube, 60_000);
  const caller = new AbortController();
  const pending = secrets.get("ns", "slow", caller.signal);
  assert.equal(signals[0]?.aborted, false, "the read has begun");
  caller.abort(new Error("deadline"));
  await assert.rejects(pending, { name: "CancelledError" });
  assert.equal(signals[0]!.aborted, true, "the API request is cancelled with the call");
});

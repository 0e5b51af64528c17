// kube/informer: an informer whose watch fails resumes with a growing backoff while the API server
// stays away, and starts again from the shortest wait once it has seen the server work: a second
// outage an hour later is not waited out as if it were the same one.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { loadKubeConfig } from "../../../../controller/kube/client.js";
import { pvInformer } from "../../../../controller/kube/cluster.js";
import { startKubeApi, type KubeApi } from "../../../kube/server.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { pv } from "../../../support/fixtures.js";
import { waitFor } from "../../../support/wait.js";

let api: KubeApi;
before(async () => {
  api = await startKubeApi({ seed: [pv("pv-0")] });
});
after(async () => {
  await api?.stop();
});

test("the resume backoff grows through one outage and starts over after the informer saw the API server work", { timeout: 60_000 }, async (t) => {
  const { lines, logger } = captureLogger("debug");
  const informer = pvInformer(loadKubeConfig(api.kubeconfigPath), logger);
  t.after(() => informer.stop());
  await informer.start();
  const waits = () => lines.filter((l) => l["message"] === "watch ended with an error; resuming").map((l) => l["retryInMs"] as number);

  await api.faults.down();
  await waitFor("a failed resume", () => waits().length >= 1, { timeoutMs: 20_000 });
  const first = Date.now();
  await waitFor("a second failed resume in the same outage", () => waits().length >= 2, { timeoutMs: 20_000 });
  assert.ok(Date.now() - first >= 100, `the second came ${Date.now() - first} ms after the first: the informer did not wait its 200 ms`);
  assert.deepEqual(waits().slice(0, 2), [200, 400]);
  await api.faults.up();
  await api.create(pv("pv-1"));
  await waitFor("the informer working again", () => informer.get("pv-1") !== undefined, { timeoutMs: 20_000 });

  const before = waits().length;
  await api.faults.down();
  await waitFor("the first resume in the second outage", () => waits().length > before, { timeoutMs: 20_000 });
  assert.equal(waits()[before], 200);
  await api.faults.up();
});

test("an informer that keeps slim objects lists again when its resourceVersion was compacted meanwhile (410 Gone)", { timeout: 60_000 }, async (t) => {
  // The 410 comes as a watch event of type ERROR carrying a Status: client-node reads its code, so
  // the transform that cuts PVs down must leave it alone, or the informer re-watches from the
  // expired resourceVersion for ever and never sees the changes it missed.
  const small = await startKubeApi({ seed: [pv("pv-0")], historySize: 5 });
  t.after(() => small.stop());
  const { lines, logger } = captureLogger("debug");
  const informer = pvInformer(loadKubeConfig(small.kubeconfigPath), logger);
  t.after(() => informer.stop());
  await informer.start();
  const lists = small.counters.get("list", "persistentvolumes");

  await small.faults.down();
  await waitFor("a failed resume", () => lines.some((l) => l["message"] === "watch ended with an error; resuming"), { timeoutMs: 20_000 });
  for (let i = 1; i <= 10; i++) await small.create(pv(`pv-${i}`));
  await small.faults.up();
  await waitFor("every PV created while the informer could not watch", () => informer.list().length === 11, { timeoutMs: 20_000 });
  assert.equal(small.counters.get("list", "persistentvolumes"), lists + 1, "listed again, once");
});

test("a first list that fails is retried with backoff, and start() resolves once a list is in the cache", { timeout: 30_000 }, async (t) => {
  const { lines, logger } = captureLogger("debug");
  const informer = pvInformer(loadKubeConfig(api.kubeconfigPath), logger);
  t.after(() => informer.stop());
  api.faults.failNext(2, 500, { verb: "list", resource: "persistentvolumes" });
  t.after(() => api.faults.clear());
  await informer.start();
  assert.ok(informer.get("pv-0"), "the list that answered is in the cache");
  const resumed = lines.filter((l) => l["message"] === "watch ended with an error; resuming");
  // The status and the API server's message, not client-node's whole response (headers and all).
  const said = "HTTP 500: Internal error occurred: injected fault";
  assert.deepEqual(
    resumed.map((l) => [l["error"], l["retryInMs"]]),
    [
      [said, 200],
      [said, 400],
    ],
  );
});

// relay/pod-claims over a fake of the two KubeApi calls it makes: this node's Pods listed, then
// watched from the list's version; what each claim's count does as Pods come, change and go; and
// an install whose RBAC lacks list or watch on Pods (pod-claims.test.ts runs it against the
// in-memory API, least-privilege.test.ts without each permission).
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { PodClaims } from "../../../../sidecar/relay/pod-claims.js";
import { KubeError, type KubeApi, type NodePod, type WatchEventType } from "../../../../sidecar/kube/api.js";
import { createLogger } from "../../../../common/log/logger.js";
import { waitFor } from "../../../support/wait.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { gatedSleep } from "../../../support/gated-sleep.js";

const pod = (name: string, claims: string[], phase = "Running"): NodePod => ({
  metadata: { name, namespace: "ns", uid: `uid-${name}` },
  spec: { volumes: claims.map((c) => ({ name: c, persistentVolumeClaim: { claimName: c } })) },
  status: { phase },
});

const forbidden = (what: string) => new KubeError(403, "Forbidden", `${what}: 403 Forbidden`);

interface FakeState {
  pods: NodePod[];
  listError?: Error;
  watchError?: Error;
}

/** Lists answer `pods` (or fail with `listError`); watches wait until ended, or fail at once with `watchError`. */
function fakeKube(current: FakeState) {
  const lists: string[] = [];
  const watches: { resourceVersion: string; emit: (type: WatchEventType, obj: NodePod) => void; end: (err?: Error) => void }[] = [];
  const kube = {
    listPodsOnNode: async (nodeName: string) => {
      lists.push(nodeName);
      if (current.listError) throw current.listError;
      return { resourceVersion: `rv-${lists.length}`, items: current.pods };
    },
    watchPodsOnNode: (opts: { resourceVersion: string; signal: AbortSignal }, onEvent: (type: WatchEventType, obj: NodePod) => void) => {
      if (current.watchError) return Promise.reject(current.watchError);
      return new Promise<void>((resolve, reject) => {
        watches.push({ resourceVersion: opts.resourceVersion, emit: onEvent, end: (err) => (err ? reject(err) : resolve()) });
        opts.signal.addEventListener("abort", () => resolve(), { once: true });
      });
    },
  } as unknown as KubeApi;
  return { kube, lists, watches };
}

const quiet = createLogger("error", "json");
const signal = () => AbortSignal.timeout(5_000);

/** A started PodClaims over fakeKube(current), logging at debug, each wait between attempts held until gate.wake(). */
function started(t: TestContext, current: FakeState) {
  const fake = fakeKube(current);
  const log = captureLogger("debug");
  const gate = gatedSleep();
  const claims = new PodClaims(fake.kube, "node-1", log.logger, gate.sleep);
  t.after(() => claims.close());
  claims.start();
  return { ...fake, log, gate, claims, warnings: () => log.lines.filter((l) => l.level === "warn") };
}

/** Two attempts refused: the warning comes with the first; the loop then waits after the second. */
async function refusedTwice(s: ReturnType<typeof started>): Promise<void> {
  await waitFor("the first refusal", () => s.gate.waits.length === 1);
  assert.equal(s.warnings().length, 1, "warned at the first refusal");
  s.gate.wake();
  await waitFor("the second refusal", () => s.gate.waits.length === 2);
}

test("nothing listed or watched until the first question (a driver that attaches never asks); that question lists and starts the watch; a list that fails says no (logged at debug)", async (t) => {
  const current: FakeState = { pods: [pod("a", ["data"])] };
  const { kube, lists, watches } = fakeKube(current);
  const claims = new PodClaims(kube, "node-1", quiet); // not started
  t.after(() => claims.close());
  assert.deepEqual([lists.length, watches.length], [0, 0]);
  assert.equal(await claims.uses("ns", "data", signal()), true);
  await waitFor("the watch the first question started", () => watches.length === 1);
  assert.equal(await claims.uses("ns", "other", signal()), false);
  assert.equal(await claims.uses("other-ns", "data", signal()), false, "a claim is namespaced");

  const failing: FakeState = { pods: [pod("a", ["data"])], listError: new Error("connection refused") };
  const log = captureLogger("debug");
  const broken = new PodClaims(fakeKube(failing).kube, "node-1", log.logger);
  t.after(() => broken.close());
  assert.equal(await broken.uses("ns", "data", signal()), false);
  assert.ok(log.lines.some((l) => l.level === "debug" && l.message === "could not list this node's Pods" && l.reason === "connection refused"));
});

test("once the watch stands: answered without a list, counted per Pod as Pods come, change, finish and go", async (t) => {
  const { kube, lists, watches } = fakeKube({ pods: [pod("a", ["shared", "only-a"]), pod("b", ["shared"])] });
  const claims = new PodClaims(kube, "node-1", quiet);
  t.after(() => claims.close());
  claims.start();
  await waitFor("the watch", () => watches.length === 1);
  assert.equal(watches[0]!.resourceVersion, "rv-1", "watched from the list's version");
  const uses = (c: string) => claims.uses("ns", c, signal());
  assert.deepEqual([await uses("shared"), await uses("only-a"), await uses("none")], [true, true, false]);

  watches[0]!.emit("DELETED", pod("a", ["shared", "only-a"]));
  assert.deepEqual([await uses("shared"), await uses("only-a")], [true, false], "b still uses shared");
  watches[0]!.emit("MODIFIED", pod("b", ["other"]));
  assert.deepEqual([await uses("shared"), await uses("other")], [false, true], "a Pod's claims are replaced, not added to");
  watches[0]!.emit("ADDED", pod("c", ["late"]));
  assert.equal(await uses("late"), true);
  watches[0]!.emit("MODIFIED", pod("c", ["late"], "Succeeded"));
  assert.equal(await uses("late"), false, "a finished Pod holds no volume");
  // A finished Pod's later changes (and its deletion) must not take from the Pods still using a claim.
  watches[0]!.emit("ADDED", pod("d", ["other"]));
  watches[0]!.emit("MODIFIED", pod("d", ["other"], "Failed"));
  watches[0]!.emit("MODIFIED", pod("d", ["other"], "Failed"));
  watches[0]!.emit("DELETED", pod("d", ["other"], "Failed"));
  assert.equal(await uses("other"), true, "b still uses it");
  watches[0]!.emit("BOOKMARK", { metadata: { resourceVersion: "rv-9" } });
  assert.equal(await uses("other"), true, "a bookmark changes nothing");
  assert.equal(lists.length, 1, "one list, at the start");
});

test("a watch that ends lists the Pods again and drops what the list no longer has; a failure backs off, reset once a watch delivers", async (t) => {
  const current: FakeState = { pods: [pod("a", ["data"])] };
  const { lists, watches, gate, log, claims, warnings } = started(t, current);
  await waitFor("the watch", () => watches.length === 1);
  current.pods = [];
  watches[0]!.end(); // the server's timeout: listed again at once
  await waitFor("the second watch", () => watches.length === 2);
  assert.equal(await claims.uses("ns", "data", signal()), false);
  assert.deepEqual(gate.waits, [], "a stream that ended is no failure");

  current.listError = new Error("connection refused");
  watches[1]!.end(new Error("stream reset"));
  for (let i = 1; i <= 3; i++) {
    await waitFor(`wait ${i}`, () => gate.waits.length === i);
    gate.wake();
  }
  current.listError = undefined;
  await waitFor("the watch again", () => watches.length === 3);
  watches[2]!.emit("ADDED", pod("b", ["data"]));
  watches[2]!.end(new Error("stream reset"));
  await waitFor("the wait after it", () => gate.waits.length === 4);
  assert.deepEqual(gate.waits, [200, 400, 800, 200]);
  assert.ok(lists.length >= 5);
  const ended = log.lines.filter((l) => l.message === "Pod watch ended; restarting");
  assert.deepEqual(ended.map((l) => [l.level, l.reason]).slice(0, 2), [
    ["debug", "stream reset"],
    ["debug", "connection refused"],
  ]);
  assert.equal(warnings().length, 0, "a failure that is not a refusal is no warning");
});

test("an API error that is not a refusal (500) is retried and answered by a list per question, not taken for a missing grant", async (t) => {
  const current: FakeState = { pods: [pod("a", ["data"])], listError: new KubeError(500, "InternalError", "500 Internal Server Error") };
  const { lists, gate, claims, warnings } = started(t, current);
  await waitFor("the first wait", () => gate.waits.length === 1);
  current.listError = undefined;
  const before = lists.length;
  assert.equal(await claims.uses("ns", "data", signal()), true);
  assert.equal(lists.length, before + 1);
  assert.equal(warnings().length, 0);
});

test("without list on Pods: warned once, naming the grant; every claim is not here, with no request; listed again, it works", async (t) => {
  const current: FakeState = { pods: [pod("a", ["data"])], listError: forbidden("list pods") };
  const s = started(t, current);
  const { lists, watches, gate, claims, warnings } = s;
  await refusedTwice(s);
  const listsSoFar = lists.length;
  assert.equal(await claims.uses("ns", "data", signal()), false);
  assert.equal(lists.length, listsSoFar, "no list per question while refused");
  assert.equal(warnings().length, 1, "warned once, not per attempt");
  assert.match(String(warnings()[0]!.message), /cannot list the Pods on this node.*grant list and watch on pods/);

  current.listError = undefined;
  gate.wake();
  await waitFor("the watch", () => watches.length === 1);
  assert.equal(await claims.uses("ns", "data", signal()), true);
});

test("without watch on Pods: warned once; every question lists them", async (t) => {
  const s = started(t, { pods: [pod("a", ["data"])], watchError: forbidden("watch pods") });
  const { lists, claims, warnings } = s;
  await refusedTwice(s);
  const before = lists.length;
  assert.equal(await claims.uses("ns", "data", signal()), true);
  assert.equal(lists.length, before + 1, "listed for the question");
  assert.equal(warnings().length, 1);
  assert.match(String(warnings()[0]!.message), /cannot watch the Pods on this node: each check .* lists them/);
});

test("closed: no more lists, and a question is answered no at once", async () => {
  const { kube, lists } = fakeKube({ pods: [pod("a", ["data"])] });
  const claims = new PodClaims(kube, "node-1", quiet);
  claims.close();
  claims.start();
  assert.equal(await claims.uses("ns", "data", signal()), false);
  assert.equal(lists.length, 0);
});

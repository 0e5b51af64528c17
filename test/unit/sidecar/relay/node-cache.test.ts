// relay/node-cache: this node's Node, kept by a watch so "is this volume in use here?" costs no
// request per heal; read directly until the watch has synced, and again whenever it is lost.
// Over a fake of the two KubeApi calls it uses (relay.test.ts runs it against the in-memory API).
import { test } from "node:test";
import assert from "node:assert/strict";
import { NodeCache } from "../../../../sidecar/relay/node-cache.js";
import type { KubeApi, NodeInfo, WatchEventType, WatchOptions } from "../../../../sidecar/kube/api.js";
import { createLogger } from "../../../../common/log/logger.js";
import { waitFor } from "../../../support/wait.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { gatedSleep } from "../../../support/gated-sleep.js";

const node = (volumesInUse: string[]): NodeInfo => ({ metadata: { name: "node-1" }, status: { volumesInUse } });

/**
 * getNode answers after `readMs` (honouring its signal), fails while `failReads` > 0, and waits
 * while `held` until release(); the watch runs until ended.
 */
function fakeKube(current: { node: NodeInfo | undefined; readMs: number; failReads: number; held?: boolean }) {
  const reads: AbortSignal[] = [];
  const readAt: number[] = [];
  const heldReads: (() => void)[] = [];
  const watches: { opts: WatchOptions; emit: (type: WatchEventType, obj: NodeInfo) => void; end: (err?: Error) => void }[] = [];
  const kube = {
    getNode: (_name: string, signal: AbortSignal) => {
      reads.push(signal);
      readAt.push(Date.now());
      if (current.failReads > 0) {
        current.failReads--;
        return Promise.reject(new Error("connection refused"));
      }
      return new Promise<NodeInfo | undefined>((resolve, reject) => {
        let t: NodeJS.Timeout | undefined;
        const answer = () => (t = setTimeout(() => resolve(current.node), current.readMs));
        if (current.held) heldReads.push(answer);
        else answer();
        signal.addEventListener("abort", () => (clearTimeout(t), reject(signal.reason as Error)), { once: true });
      });
    },
    watchNode: () => (opts: WatchOptions, onEvent: (type: WatchEventType, obj: NodeInfo) => void) =>
      new Promise<void>((resolve, reject) => {
        watches.push({ opts, emit: onEvent, end: (err) => (err ? reject(err) : resolve()) });
        opts.signal.addEventListener("abort", () => resolve(), { once: true });
      }),
  } as unknown as KubeApi;
  const release = () => {
    current.held = false;
    for (const answer of heldReads.splice(0)) answer();
  };
  return { kube, reads, readAt, watches, release };
}

const logger = createLogger("error", "json");

test("before its watch has synced, every get() reads the Node now", async () => {
  const { kube, reads } = fakeKube({ node: node(["kubernetes.io/csi/drv^vol-1"]), readMs: 0, failReads: 0 });
  const cache = new NodeCache(kube, "node-1", logger); // not started
  assert.deepEqual((await cache.get(AbortSignal.timeout(5_000)))?.status?.volumesInUse, ["kubernetes.io/csi/drv^vol-1"]);
  assert.equal(reads.length, 1);
});

test("once synced, get() answers from the watch without a request, and follows its changes", async (t) => {
  // The first read takes 20 ms: a read given no time at all would never sync.
  const current = { node: node([]), readMs: 20, failReads: 0 };
  const { kube, reads, watches } = fakeKube(current);
  const cache = new NodeCache(kube, "node-1", logger);
  t.after(() => cache.close());
  cache.start();
  await waitFor("the watch", () => watches.length === 1);
  assert.equal(watches[0]!.opts.name, "node-1");
  assert.equal(watches[0]!.opts.resourceVersion, undefined, "no resourceVersion: the watch starts with the current Node");
  const signal = AbortSignal.timeout(5_000);
  assert.deepEqual((await cache.get(signal))?.status?.volumesInUse, []);
  watches[0]!.emit("MODIFIED", node(["kubernetes.io/csi/drv^vol-2"]));
  assert.deepEqual((await cache.get(signal))?.status?.volumesInUse, ["kubernetes.io/csi/drv^vol-2"]);
  watches[0]!.emit("BOOKMARK", { metadata: { name: "" } });
  assert.deepEqual((await cache.get(signal))?.status?.volumesInUse, ["kubernetes.io/csi/drv^vol-2"], "a bookmark changes nothing");
  watches[0]!.emit("DELETED", node([]));
  assert.equal(await cache.get(signal), undefined);
  assert.equal(reads.length, 1, "one read, at the start");
});

test("a first read that fails is retried; a lost watch is read again and watched again; meanwhile get() reads", async (t) => {
  const current = { node: node(["kubernetes.io/csi/drv^vol-1"]), readMs: 0, failReads: 1, held: false };
  const { kube, reads, readAt, watches, release } = fakeKube(current);
  const cache = new NodeCache(kube, "node-1", logger);
  t.after(() => (release(), cache.close()));
  cache.start();
  await waitFor("the watch after a failed first read", () => watches.length === 1);
  assert.equal(reads.length, 2);
  assert.ok(readAt[1]! - readAt[0]! >= 150, `retried after a backoff (200 ms), not at once: ${readAt[1]! - readAt[0]!} ms`);
  current.held = true; // the API server stops answering reads for a while
  watches[0]!.end(new Error("watch closed"));
  await waitFor("the Node read again after the lost watch", () => reads.length === 3);
  // A deadline on a referenced timer: AbortSignal.timeout's does not keep the event loop alive.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new Error("deadline")), 50);
  const during = cache.get(deadline.signal);
  await assert.rejects(during, /deadline/, "unsynced again: get() reads the Node itself (and its deadline ends the read)");
  clearTimeout(timer);
  assert.equal(reads.length, 4);
  release();
  await waitFor("watched again", () => watches.length === 2);
  const signal = AbortSignal.timeout(5_000);
  assert.deepEqual((await cache.get(signal))?.status?.volumesInUse, ["kubernetes.io/csi/drv^vol-1"]);
});

test("close() ends the watch and the loop", async () => {
  const { kube, watches } = fakeKube({ node: node([]), readMs: 0, failReads: 0 });
  const cache = new NodeCache(kube, "node-1", logger);
  cache.start();
  await waitFor("the watch", () => watches.length === 1);
  cache.close();
  assert.equal(watches[0]!.opts.signal.aborted, true);
});

test("a lost watch or a failed read is tried again after 200 ms, doubling up to 10 s, and after 200 ms again once a watch delivered; each loss is logged at debug", async (t) => {
  const current = { node: node([]), readMs: 0, failReads: 8 };
  const { kube, reads, watches } = fakeKube(current);
  const { lines, logger: debug } = captureLogger("debug");
  const gate = gatedSleep();
  const cache = new NodeCache(kube, "node-1", debug, gate.sleep);
  t.after(() => cache.close());
  cache.start();
  for (let i = 1; i <= 8; i++) {
    await waitFor(`wait ${i}`, () => gate.waits.length === i);
    assert.equal(reads.length, i, "no new attempt before the wait is over");
    gate.wake();
  }
  assert.deepEqual(gate.waits, [200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]);
  await waitFor("the watch", () => watches.length === 1);
  watches[0]!.emit("MODIFIED", node([]));
  watches[0]!.end(new Error("watch closed"));
  await waitFor("the wait after the lost watch", () => gate.waits.length === 9);
  assert.equal(gate.waits[8], 200, "a watch that delivered starts the backoff over");
  assert.deepEqual(
    lines.filter((l) => l["message"] === "Node watch ended; restarting").map((l) => [l["level"], l["reason"]]),
    [...Array.from({ length: 8 }, () => ["debug", "connection refused"]), ["debug", "watch closed"]],
  );
});

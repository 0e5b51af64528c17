// relay/pv-cache in process: PersistentVolumes served from memory only while that cannot mislead (the
// reasons are in the module's header): each PV asked for has its own watch, by name, from
// resourceVersion 0, and is served as that watch shows it; a watch that does not show it within
// the wait costs a read; a lost watch costs reads; the TTL and the size bound the rest, and end
// their watches. Nothing here watches or lists the PV collection. Over a fake of the two KubeApi
// calls it uses; pv-cache.test.ts runs it in a real sidecar over the in-memory API.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { PvCache, type PvCacheOptions } from "../../../../sidecar/relay/pv-cache.js";
import { KubeError, type KubeApi, type PersistentVolume, type WatchEventType, type WatchOptions } from "../../../../sidecar/kube/api.js";
import { createLogger, type Logger } from "../../../../common/log/logger.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { waitFor } from "../../../support/wait.js";

const pv = (name: string, more: Partial<PersistentVolume["metadata"]> = {}): PersistentVolume =>
  ({ metadata: { name, resourceVersion: "1", ...more }, spec: { csi: { driver: "drv", volumeHandle: `vol-${name}` } } }) as PersistentVolume;

interface FakeWatch {
  opts: WatchOptions;
  emit: (type: WatchEventType, o: PersistentVolume) => void;
  end: (err?: Error) => void;
}

function fakeKube() {
  const stored = new Map<string, PersistentVolume>();
  const reads: string[] = [];
  /** Every request in order: "get <name>" or "watch <name>". */
  const requests: string[] = [];
  /** Reads of these names wait until released (answering what was stored when they began). */
  const held = new Map<string, (() => void)[]>();
  const watches: FakeWatch[] = [];
  /** While set, a new watch does not send the PV's state (as a slow watch cache would not yet). */
  let quiet = false;
  const kube = {
    getPersistentVolume: async (name: string) => {
      reads.push(name);
      requests.push(`get ${name}`);
      const now = stored.get(name);
      const gate = held.get(name);
      if (gate) await new Promise<void>((resolve) => gate.push(resolve));
      return now;
    },
    watchPersistentVolume: () => (opts: WatchOptions, onEvent: (type: WatchEventType, o: PersistentVolume) => void) =>
      new Promise<void>((resolve, reject) => {
        const w: FakeWatch = { opts, emit: onEvent, end: (err) => (err ? reject(err) : resolve()) };
        watches.push(w);
        requests.push(`watch ${opts.name}`);
        opts.signal.addEventListener("abort", () => resolve(), { once: true });
        // resourceVersion 0: the state first (a synthetic ADDED), then the changes.
        const state = stored.get(opts.name);
        if (state && !quiet) queueMicrotask(() => onEvent("ADDED", state));
      }),
  } as unknown as KubeApi;
  const named = (name: string) => watches.filter((w) => w.opts.name === name);
  return {
    kube,
    stored,
    reads,
    requests,
    watches,
    /** The newest watch of this PV. */
    watchOf: (name: string) => named(name).at(-1)!,
    /** Watches not ended by the cache, by PV name. */
    open: () => watches.filter((w) => !w.opts.signal.aborted).map((w) => w.opts.name),
    hold: (name: string) => void held.set(name, []),
    release: (name: string) => {
      for (const open of held.get(name) ?? []) open();
      held.delete(name);
    },
    quiet: (on: boolean) => void (quiet = on),
  };
}

function started(t: TestContext, o: PvCacheOptions & { ttlMs?: number; logger?: Logger } = {}) {
  const f = fakeKube();
  const cache = new PvCache(f.kube, o.ttlMs ?? 60_000, o.logger ?? createLogger("error", "json"), { waitMs: 50, ...o });
  t.after(() => cache.close());
  return { ...f, cache };
}

const signal = () => AbortSignal.timeout(5_000);

test("a PV asked for once is watched by name from the watch cache, and served as the watch shows it: one request, none for the next asks; no watch of the collection", async (t) => {
  const f = started(t);
  f.stored.set("pv-a", pv("pv-a"));
  f.stored.set("pv-other", pv("pv-other"));
  assert.equal(f.watches.length, 0, "nothing is watched before a PV is asked for");
  for (let i = 0; i < 3; i++) assert.equal((await f.cache.get("pv-a", signal()))?.metadata.name, "pv-a");
  assert.deepEqual(f.requests, ["watch pv-a"], "no read: the watch's first event is the PV");
  assert.deepEqual(
    f.watches.map((w) => ({ name: w.opts.name, resourceVersion: w.opts.resourceVersion })),
    [{ name: "pv-a", resourceVersion: "0" }],
  );
  assert.equal(f.cache.watching, 1);
});

test("two requests at once for a PV share one watch", async (t) => {
  const f = started(t);
  f.stored.set("pv-a", pv("pv-a"));
  f.quiet(true);
  const both = Promise.all([f.cache.get("pv-a", signal()), f.cache.get("pv-a", signal())]);
  await waitFor("the watch started", () => f.watches.length === 1);
  f.watchOf("pv-a").emit("ADDED", f.stored.get("pv-a")!);
  assert.deepEqual(
    (await both).map((x) => x?.metadata.name),
    ["pv-a", "pv-a"],
  );
  assert.deepEqual(f.requests, ["watch pv-a"]);
});

test("a change on the PV's watch is what the next request gets (its deletion began); its removal drops it and ends the watch", async (t) => {
  const f = started(t);
  f.stored.set("pv-a", pv("pv-a"));
  await f.cache.get("pv-a", signal());
  f.watchOf("pv-a").emit("BOOKMARK", pv("", { resourceVersion: "5" }));
  assert.equal((await f.cache.get("pv-a", signal()))?.metadata.resourceVersion, "1", "a bookmark changes nothing");
  const deleting = pv("pv-a", { resourceVersion: "2", deletionTimestamp: "2026-12-03T05:30:00Z" });
  f.stored.set("pv-a", deleting);
  f.watchOf("pv-a").emit("MODIFIED", deleting);
  assert.equal((await f.cache.get("pv-a", signal()))?.metadata.deletionTimestamp, "2026-12-03T05:30:00Z");
  assert.deepEqual(f.requests, ["watch pv-a"], "the change came on the watch");
  f.stored.delete("pv-a");
  f.watchOf("pv-a").emit("DELETED", deleting);
  assert.deepEqual(f.open(), [], "its watch ended with it");
  assert.equal(await f.cache.get("pv-a", signal()), undefined);
  assert.deepEqual(f.requests, ["watch pv-a", "watch pv-a", "get pv-a"], "absent: a new watch shows nothing, so it is read");
  assert.deepEqual(f.open(), [], "an absent PV is not watched");
});

test("a watch that does not show an existing PV within the wait: the request reads it, and requests read, without a watch, for 200 ms", async (t) => {
  let now = 0;
  const f = started(t, { now: () => now });
  f.stored.set("pv-a", pv("pv-a"));
  f.quiet(true);
  assert.equal((await f.cache.get("pv-a", signal()))?.metadata.name, "pv-a");
  assert.deepEqual(f.requests, ["watch pv-a", "get pv-a"]);
  assert.deepEqual(f.open(), [], "the silent watch ended");
  f.quiet(false);
  now += 199;
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.requests, ["watch pv-a", "get pv-a", "get pv-a"]);
  now += 1;
  await f.cache.get("pv-a", signal());
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.requests, ["watch pv-a", "get pv-a", "get pv-a", "watch pv-a"], "watched again after 200 ms, and served from it");
});

test("a watch that shows its PV late, while the request reads, is kept", async (t) => {
  const f = started(t);
  f.stored.set("pv-a", pv("pv-a"));
  f.quiet(true);
  f.hold("pv-a");
  const first = f.cache.get("pv-a", signal());
  await waitFor("the read after the wait", () => f.reads.length === 1);
  f.watchOf("pv-a").emit("ADDED", f.stored.get("pv-a")!);
  f.release("pv-a");
  assert.equal((await first)?.metadata.name, "pv-a");
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.requests, ["watch pv-a", "get pv-a"]);
  assert.deepEqual(f.open(), ["pv-a"]);
});

test("a failed watch drops its entry; the request reads, and no new watch starts for 200 ms, doubling to 10 s, back to 200 ms once one showed its PV", async (t) => {
  let now = 0;
  const f = started(t, { now: () => now });
  f.stored.set("pv-a", pv("pv-a"));
  await f.cache.get("pv-a", signal());
  f.watchOf("pv-a").end(new Error("connection reset"));
  await waitFor("the entry dropped", () => f.open().length === 0);
  f.quiet(true); // the watches fail before they show the PV
  const waits: number[] = [];
  for (let i = 0; i < 7; i++) {
    const start = now;
    const watches = f.watches.length;
    await f.cache.get("pv-a", signal());
    assert.equal(f.watches.length, watches, "no new watch right after a failure");
    for (;;) {
      now += 100;
      const asking = f.cache.get("pv-a", signal());
      if (f.watches.length > watches) {
        f.watchOf("pv-a").end(new Error("connection reset"));
        await asking;
        break;
      }
      await asking;
    }
    waits.push(now - start);
    await waitFor("the entry dropped", () => f.open().length === 0);
  }
  assert.deepEqual(waits, [200, 400, 800, 1600, 3200, 6400, 10_000]);
  f.quiet(false);
  now += 10_000;
  await f.cache.get("pv-a", signal()); // shown
  const requests = f.requests.length;
  f.watchOf("pv-a").end(new Error("connection reset"));
  await waitFor("the entry dropped", () => f.open().length === 0);
  now += 200;
  await f.cache.get("pv-a", signal());
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.requests.slice(requests), ["watch pv-a"], "watched again after 200 ms");
});

test("a watch the server ends drops its entry: the next request watches again", async (t) => {
  const f = started(t);
  f.stored.set("pv-a", pv("pv-a"));
  await f.cache.get("pv-a", signal());
  f.watchOf("pv-a").end();
  await waitFor("the entry dropped", () => f.cache.watching === 0);
  await f.cache.get("pv-a", signal());
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.requests, ["watch pv-a", "watch pv-a"]);
});

test("an entry lives at most the TTL and its watch with it; the cache holds at most maxEntries, the least recently used going first, its watch ended", async (t) => {
  let now = 0;
  const short = started(t, { ttlMs: 30_000, now: () => now });
  short.stored.set("pv-a", pv("pv-a"));
  await short.cache.get("pv-a", signal());
  now = 29_999;
  await short.cache.get("pv-a", signal());
  now = 30_000;
  await short.cache.get("pv-a", signal());
  assert.deepEqual(short.requests, ["watch pv-a", "watch pv-a"]);
  assert.equal(short.watches[0]!.opts.signal.aborted, true, "the expired entry's watch ended");
  assert.deepEqual(short.open(), ["pv-a"]);

  const small = started(t, { maxEntries: 2 });
  for (const n of ["pv-1", "pv-2", "pv-3"]) small.stored.set(n, pv(n));
  for (const n of ["pv-1", "pv-2", "pv-3", "pv-2", "pv-1"]) await small.cache.get(n, signal());
  assert.deepEqual(small.requests, ["watch pv-1", "watch pv-2", "watch pv-3", "watch pv-1"], "pv-1 went first; pv-2 and pv-3 stayed");
  assert.deepEqual(small.open().sort(), ["pv-1", "pv-2"], "pv-3 was evicted by pv-1's second ask: two watches at most");
});

test("without watch on PersistentVolumes (an older RBAC) it says so once, at warn, and reads", async (t) => {
  const { lines, logger } = captureLogger("debug");
  let now = 0;
  const f = started(t, { logger, now: () => now });
  f.stored.set("pv-a", pv("pv-a"));
  f.quiet(true);
  for (const err of [
    new KubeError(403, "Forbidden", 'persistentvolumes "pv-a" is forbidden: cannot watch resource "persistentvolumes"'),
    new KubeError(403, "Forbidden", "again"),
    new Error("connection reset"),
  ]) {
    now += 10_000;
    const asking = f.cache.get("pv-a", signal());
    f.watchOf("pv-a").end(err);
    assert.equal((await asking)?.metadata.name, "pv-a");
  }
  assert.deepEqual(
    lines.filter((l) => String(l["message"]).startsWith("PersistentVolume watch ended")).map((l) => [l["level"], l["pv"]]),
    [
      ["warn", "pv-a"],
      ["debug", "pv-a"],
      ["debug", "pv-a"],
    ],
  );
  assert.equal(f.reads.length, 3);
});

test("a TTL of 0 keeps nothing and watches nothing: every request reads", async (t) => {
  const f = started(t, { ttlMs: 0 });
  f.stored.set("pv-a", pv("pv-a"));
  await f.cache.get("pv-a", signal());
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.requests, ["get pv-a", "get pv-a"]);
});

test("close() ends every watch and serves nothing more from memory", async (t) => {
  const f = started(t);
  for (const n of ["pv-a", "pv-b"]) f.stored.set(n, pv(n));
  await f.cache.get("pv-a", signal());
  await f.cache.get("pv-b", signal());
  f.cache.close();
  assert.deepEqual(f.open(), []);
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.requests, ["watch pv-a", "watch pv-b", "get pv-a"], "and opens none");
});

test("a request whose caller gave up while it waited for the watch ends cancelled, with no read", async (t) => {
  const f = started(t, { waitMs: 5_000 });
  f.stored.set("pv-a", pv("pv-a"));
  f.quiet(true);
  const gone = new AbortController();
  const asking = f.cache.get("pv-a", gone.signal);
  await waitFor("the watch started", () => f.watches.length === 1);
  gone.abort();
  await assert.rejects(asking, /cancelled/);
  assert.deepEqual(f.requests, ["watch pv-a"]);
});

test("an entry asked for again after its TTL counts as the newest when the oldest must go", async (t) => {
  let now = 0;
  const f = started(t, { ttlMs: 100_000, maxEntries: 3, now: () => now });
  for (const n of ["pv-z", "pv-x", "pv-y", "pv-w", "pv-v"]) f.stored.set(n, pv(n));
  const at = async (ms: number, name: string) => ((now = ms), await f.cache.get(name, signal()));
  await at(0, "pv-z");
  await at(4_000, "pv-x");
  await at(50_000, "pv-y");
  await at(105_000, "pv-x"); // expired: watched again, now the newest
  await at(106_000, "pv-w"); // pv-z goes
  await at(107_000, "pv-v"); // pv-y goes
  await at(108_000, "pv-x");
  assert.deepEqual(
    f.requests.map((r) => r.replace("watch ", "")),
    ["pv-z", "pv-x", "pv-y", "pv-x", "pv-w", "pv-v"],
    "pv-x, watched again at 105 s, stayed",
  );
});

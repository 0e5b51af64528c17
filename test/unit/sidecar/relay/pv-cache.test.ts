// relay/pv-cache in process: PersistentVolumes served from memory only while that cannot mislead (the
// reasons are in the module's header): each cached PV has its own watch, by name, and is served
// only once that watch showed it at the version read; any event for it drops it and ends the
// watch; a lost watch costs reads; the TTL and the size bound the rest, and end their watches.
// Nothing here watches or lists the PV collection. Over a fake of the two KubeApi calls it uses;
// pv-cache.test.ts runs it in a real sidecar over the in-memory API.
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
  /** Reads of these names wait until released (answering what was stored when they began). */
  const held = new Map<string, (() => void)[]>();
  const watches: FakeWatch[] = [];
  /** While set, a new watch does not send the PV's state (as a slow watch cache would not yet). */
  let quiet = false;
  const kube = {
    getPersistentVolume: async (name: string) => {
      reads.push(name);
      const now = stored.get(name);
      const gate = held.get(name);
      if (gate) await new Promise<void>((resolve) => gate.push(resolve));
      return now;
    },
    watchPersistentVolume: () => (opts: WatchOptions, onEvent: (type: WatchEventType, o: PersistentVolume) => void) =>
      new Promise<void>((resolve, reject) => {
        const w: FakeWatch = { opts, emit: onEvent, end: (err) => (err ? reject(err) : resolve()) };
        watches.push(w);
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
  const cache = new PvCache(f.kube, o.ttlMs ?? 60_000, o.logger ?? createLogger("error", "json"), o);
  t.after(() => cache.close());
  return { ...f, cache };
}

const signal = () => AbortSignal.timeout(5_000);

test("a PV read once is served from memory while its own watch (by name, from the watch cache) stands; no watch of the collection", async (t) => {
  const f = started(t);
  f.stored.set("pv-a", pv("pv-a"));
  f.stored.set("pv-other", pv("pv-other"));
  assert.equal(f.watches.length, 0, "nothing is watched before a PV is read");
  for (let i = 0; i < 3; i++) assert.equal((await f.cache.get("pv-a", signal()))?.metadata.name, "pv-a");
  assert.deepEqual(f.reads, ["pv-a"]);
  assert.deepEqual(
    f.watches.map((w) => ({ name: w.opts.name, resourceVersion: w.opts.resourceVersion })),
    [{ name: "pv-a", resourceVersion: "0" }],
  );
  assert.equal(f.cache.watching, 1);
});

test("an event for a cached PV drops it and ends its watch: the next request reads it again and sees the change (its deletion began)", async (t) => {
  const f = started(t);
  f.stored.set("pv-a", pv("pv-a"));
  await f.cache.get("pv-a", signal());
  f.watchOf("pv-a").emit("BOOKMARK", pv("", { resourceVersion: "5" }));
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.reads, ["pv-a"], "a bookmark changes nothing");
  const deleting = pv("pv-a", { resourceVersion: "2", deletionTimestamp: "2026-12-03T05:30:00Z" });
  f.stored.set("pv-a", deleting);
  f.watchOf("pv-a").emit("MODIFIED", deleting);
  assert.deepEqual(f.open(), [], "its watch ended with it");
  assert.equal((await f.cache.get("pv-a", signal()))?.metadata.deletionTimestamp, "2026-12-03T05:30:00Z");
  f.stored.delete("pv-a");
  f.watchOf("pv-a").emit("DELETED", deleting);
  assert.equal(await f.cache.get("pv-a", signal()), undefined);
  assert.deepEqual(f.reads, ["pv-a", "pv-a", "pv-a"]);
  assert.deepEqual(f.open(), [], "an absent PV is not watched");
});

test("a change between the read and its watch: the watch shows another version, so the read is served but not kept", async (t) => {
  const f = started(t);
  f.stored.set("pv-a", pv("pv-a"));
  f.hold("pv-a");
  const racing = f.cache.get("pv-a", signal());
  await waitFor("the read in flight", () => f.reads.length === 1);
  f.stored.set("pv-a", pv("pv-a", { resourceVersion: "2", deletionTimestamp: "2026-12-03T05:30:00Z" }));
  f.release("pv-a");
  assert.equal((await racing)?.metadata.resourceVersion, "1");
  await waitFor("the entry dropped", () => f.open().length === 0);
  assert.equal((await f.cache.get("pv-a", signal()))?.metadata.deletionTimestamp, "2026-12-03T05:30:00Z", "read again");
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.reads, ["pv-a", "pv-a"], "then served: its watch showed the version read");
});

test("a request waits for a new entry's watch to show the PV rather than read it again; one that never shows is read again after a second", async (t) => {
  const f = started(t);
  f.stored.set("pv-a", pv("pv-a"));
  f.quiet(true);
  await f.cache.get("pv-a", signal());
  const waiting = f.cache.get("pv-a", signal());
  f.watchOf("pv-a").emit("ADDED", f.stored.get("pv-a")!);
  assert.equal((await waiting)?.metadata.name, "pv-a");
  assert.deepEqual(f.reads, ["pv-a"]);

  // Deleted between its read and its watch: the watch never shows it.
  f.stored.set("pv-b", pv("pv-b"));
  await f.cache.get("pv-b", signal());
  f.stored.delete("pv-b");
  assert.equal(await f.cache.get("pv-b", signal()), undefined, "not served without its watch's word");
  assert.deepEqual(f.reads, ["pv-a", "pv-b", "pv-b"]);
  assert.deepEqual(f.open(), ["pv-a"]);
});

test("a failed watch drops its entry; every request then reads, and no new watch starts for 200 ms, doubling to 10 s, back to 200 ms once one stood", async (t) => {
  let now = 0;
  const f = started(t, { now: () => now });
  f.stored.set("pv-a", pv("pv-a"));
  const fail = async () => {
    await f.cache.get("pv-a", signal());
    f.watchOf("pv-a").end(new Error("connection reset"));
    await waitFor("the entry dropped", () => f.open().length === 0);
  };
  await fail();
  f.quiet(true); // the watches fail before they show the PV: none stood
  const waits: number[] = [];
  for (let i = 0; i < 7; i++) {
    const start = now;
    const watches = f.watches.length;
    await f.cache.get("pv-a", signal());
    assert.equal(f.watches.length, watches, "no new watch right after a failure");
    while (f.watches.length === watches) {
      now += 100;
      await f.cache.get("pv-a", signal());
    }
    waits.push(now - start);
    f.watchOf("pv-a").end(new Error("connection reset"));
    await waitFor("the entry dropped", () => f.open().length === 0);
  }
  assert.deepEqual(waits, [200, 400, 800, 1600, 3200, 6400, 10_000]);
  f.quiet(false);
  now += 10_000;
  await f.cache.get("pv-a", signal()); // stands
  await f.cache.get("pv-a", signal());
  const reads = f.reads.length;
  f.watchOf("pv-a").end(new Error("connection reset"));
  await waitFor("the entry dropped", () => f.open().length === 0);
  now += 200;
  await f.cache.get("pv-a", signal());
  await f.cache.get("pv-a", signal());
  assert.equal(f.reads.length, reads + 1, "watched again after 200 ms");
});

test("a watch the server ends drops its entry: the next request reads and watches again", async (t) => {
  const f = started(t);
  f.stored.set("pv-a", pv("pv-a"));
  await f.cache.get("pv-a", signal());
  f.watchOf("pv-a").end();
  await waitFor("the entry dropped", () => f.cache.watching === 0);
  await f.cache.get("pv-a", signal());
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.reads, ["pv-a", "pv-a"]);
  assert.equal(f.watches.length, 2);
});

test("an entry lives at most the TTL and its watch with it; the cache holds at most maxEntries, the least recently read going first, its watch ended", async (t) => {
  let now = 0;
  const short = started(t, { ttlMs: 30_000, now: () => now });
  short.stored.set("pv-a", pv("pv-a"));
  await short.cache.get("pv-a", signal());
  now = 29_999;
  await short.cache.get("pv-a", signal());
  now = 30_000;
  await short.cache.get("pv-a", signal());
  assert.deepEqual(short.reads, ["pv-a", "pv-a"]);
  assert.equal(short.watches[0]!.opts.signal.aborted, true, "the expired entry's watch ended");
  assert.deepEqual(short.open(), ["pv-a"]);

  const small = started(t, { maxEntries: 2 });
  for (const n of ["pv-1", "pv-2", "pv-3"]) small.stored.set(n, pv(n));
  for (const n of ["pv-1", "pv-2", "pv-3", "pv-2", "pv-1"]) await small.cache.get(n, signal());
  assert.deepEqual(small.reads, ["pv-1", "pv-2", "pv-3", "pv-1"], "pv-1 went first; pv-2 and pv-3 stayed");
  assert.deepEqual(small.open().sort(), ["pv-1", "pv-2"], "pv-3 was evicted by pv-1's second read: two watches at most");
});

test("without watch on PersistentVolumes (an older RBAC) it says so once, at warn, and reads on every request", async (t) => {
  const { lines, logger } = captureLogger("debug");
  let now = 0;
  const f = started(t, { logger, now: () => now });
  f.stored.set("pv-a", pv("pv-a"));
  for (const err of [
    new KubeError(403, "Forbidden", 'persistentvolumes "pv-a" is forbidden: cannot watch resource "persistentvolumes"'),
    new KubeError(403, "Forbidden", "again"),
    new Error("connection reset"),
  ]) {
    now += 10_000;
    await f.cache.get("pv-a", signal());
    f.watchOf("pv-a").end(err);
    await waitFor("the entry dropped", () => f.cache.watching === 0);
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
  assert.deepEqual(f.reads, ["pv-a", "pv-a"]);
  assert.equal(f.watches.length, 0, "no watch");
});

test("close() ends every watch and serves nothing more from memory", async (t) => {
  const f = started(t);
  for (const n of ["pv-a", "pv-b"]) f.stored.set(n, pv(n));
  await f.cache.get("pv-a", signal());
  await f.cache.get("pv-b", signal());
  f.cache.close();
  assert.deepEqual(f.open(), []);
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.reads, ["pv-a", "pv-b", "pv-a"]);
  assert.equal(f.watches.length, 2, "and opens none");
});

test("an entry read again after its TTL counts as the newest when the oldest must go", async (t) => {
  let now = 0;
  const f = started(t, { ttlMs: 100_000, maxEntries: 3, now: () => now });
  for (const n of ["pv-z", "pv-x", "pv-y", "pv-w", "pv-v"]) f.stored.set(n, pv(n));
  const at = async (ms: number, name: string) => ((now = ms), await f.cache.get(name, signal()));
  await at(0, "pv-z");
  await at(4_000, "pv-x");
  await at(50_000, "pv-y");
  await at(105_000, "pv-x"); // expired: read again, now the newest
  await at(106_000, "pv-w"); // pv-z goes
  await at(107_000, "pv-v"); // pv-y goes
  await at(108_000, "pv-x");
  assert.deepEqual(f.reads, ["pv-z", "pv-x", "pv-y", "pv-x", "pv-w", "pv-v"], "pv-x, read again at 105 s, stayed");
});

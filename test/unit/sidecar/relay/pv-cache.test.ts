// relay/pv-cache in process: PersistentVolumes served from memory only while that cannot mislead (the
// reasons are in the module's header): an event for a PV drops its entry, a read that raced an
// event is not kept, a lost watch drops everything, the TTL and the size bound the rest. Over a
// fake of the three KubeApi calls it uses; pv-cache.test.ts runs it in a real sidecar.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { PvCache, type PvCacheOptions } from "../../../../sidecar/relay/pv-cache.js";
import { gatedSleep } from "../../../support/gated-sleep.js";
import { KubeError, type KubeApi, type PersistentVolume, type WatchEventType } from "../../../../sidecar/kube/api.js";
import { createLogger, type Logger } from "../../../../common/log/logger.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { waitFor } from "../../../support/wait.js";

const pv = (name: string, more: Partial<PersistentVolume["metadata"]> = {}): PersistentVolume =>
  ({ metadata: { name, resourceVersion: "1", ...more }, spec: { csi: { driver: "drv", volumeHandle: `vol-${name}` } } }) as PersistentVolume;

function fakeKube() {
  const stored = new Map<string, PersistentVolume>();
  const reads: string[] = [];
  /** Reads of these names wait until released. */
  const held = new Map<string, (() => void)[]>();
  let watch: { emit: (type: WatchEventType, o: PersistentVolume) => void; end: (err?: Error) => void } | undefined;
  let watches = 0;
  let watchSignal: AbortSignal | undefined;
  /** Lists of the collection's version (each new watch starts with one); held while `versionGate` is set. */
  let versions = 0;
  let versionGate: Promise<void> | undefined;
  const kube = {
    getPersistentVolume: async (name: string) => {
      reads.push(name);
      const gate = held.get(name);
      if (gate) await new Promise<void>((resolve) => gate.push(resolve));
      return stored.get(name);
    },
    persistentVolumesVersion: async () => {
      versions++;
      await versionGate;
      return "100";
    },
    watchPersistentVolumes: (opts: { resourceVersion: string; signal: AbortSignal }, onEvent: (type: WatchEventType, o: PersistentVolume) => void) =>
      new Promise<void>((resolve, reject) => {
        watches++;
        watchSignal = opts.signal;
        watch = { emit: onEvent, end: (err) => (err ? reject(err) : resolve()) };
        opts.signal.addEventListener("abort", () => resolve(), { once: true });
      }),
  } as unknown as KubeApi;
  return {
    kube,
    stored,
    reads,
    hold: (name: string) => void held.set(name, []),
    release: (name: string) => {
      for (const open of held.get(name) ?? []) open();
      held.delete(name);
    },
    watch: () => watch!,
    watches: () => watches,
    watchSignal: () => watchSignal!,
    versions: () => versions,
    /** Holds the next watch's start (its version list) until the returned function is called. */
    holdWatchStart: () => {
      let open!: () => void;
      versionGate = new Promise<void>((resolve) => (open = resolve));
      return () => {
        versionGate = undefined;
        open();
      };
    },
  };
}

async function started(t: TestContext, o: PvCacheOptions & { ttlMs?: number; logger?: Logger } = {}) {
  const f = fakeKube();
  const cache = new PvCache(f.kube, o.ttlMs ?? 60_000, o.logger ?? createLogger("error", "json"), o);
  t.after(() => cache.close());
  cache.start();
  await waitFor("the PV watch", () => f.watches() === 1);
  return { ...f, cache };
}

const signal = () => AbortSignal.timeout(5_000);

test("a PV read once is served from memory while the watch stands", async (t) => {
  const f = await started(t);
  f.stored.set("pv-a", pv("pv-a"));
  assert.equal((await f.cache.get("pv-a", signal()))?.metadata.name, "pv-a");
  assert.equal((await f.cache.get("pv-a", signal()))?.metadata.name, "pv-a");
  assert.deepEqual(f.reads, ["pv-a"]);
});

test("an event for a cached PV drops it: the next request reads it again and sees the change (its deletion began)", async (t) => {
  const f = await started(t);
  f.stored.set("pv-a", pv("pv-a"));
  await f.cache.get("pv-a", signal());
  const deleting = pv("pv-a", { resourceVersion: "2", deletionTimestamp: "2026-12-03T05:30:00Z" });
  f.stored.set("pv-a", deleting);
  f.watch().emit("MODIFIED", deleting);
  assert.equal((await f.cache.get("pv-a", signal()))?.metadata.deletionTimestamp, "2026-12-03T05:30:00Z");
  f.stored.delete("pv-a");
  f.watch().emit("DELETED", deleting);
  assert.equal(await f.cache.get("pv-a", signal()), undefined);
  assert.deepEqual(f.reads, ["pv-a", "pv-a", "pv-a"]);
  f.watch().emit("BOOKMARK", pv("", { resourceVersion: "5" }));
});

test("a read that raced an event for its PV is served but not kept", async (t) => {
  const f = await started(t);
  f.stored.set("pv-a", pv("pv-a"));
  f.hold("pv-a");
  const racing = f.cache.get("pv-a", signal());
  await waitFor("the read in flight", () => f.reads.length === 1);
  f.watch().emit("MODIFIED", pv("pv-a", { resourceVersion: "2" }));
  f.release("pv-a");
  await racing;
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.reads, ["pv-a", "pv-a"], "read again: the first answer may predate the event");
});

test("an absent PV is not kept, and a read that ended is forgotten: a later event for that name spoils no other read", async (t) => {
  const f = await started(t);
  assert.equal(await f.cache.get("pv-new", signal()), undefined);
  f.stored.set("pv-b", pv("pv-b"));
  f.hold("pv-b");
  const inFlight = f.cache.get("pv-b", signal());
  await waitFor("pv-b's read in flight", () => f.reads.includes("pv-b"));
  f.stored.set("pv-new", pv("pv-new"));
  f.watch().emit("ADDED", pv("pv-new")); // created after it was read as absent
  f.release("pv-b");
  await inFlight;
  assert.equal((await f.cache.get("pv-new", signal()))?.metadata.name, "pv-new", "read again, not remembered as absent");
  await f.cache.get("pv-b", signal());
  assert.deepEqual(f.reads, ["pv-new", "pv-b", "pv-new"], "pv-b was kept: the event was about no PV read or cached then");
});

test("a lost watch drops every entry; until it stands again every request reads", async (t) => {
  const f = await started(t);
  f.stored.set("pv-a", pv("pv-a"));
  await f.cache.get("pv-a", signal());
  f.watch().end(new Error("watch closed"));
  await waitFor("the watch resumed", () => f.watches() === 2);
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.reads, ["pv-a", "pv-a"]);
});

test("a read that began before the watch stood again is served but not kept: its answer may predate the version the new watch starts from", async (t) => {
  const f = await started(t);
  f.stored.set("pv-b", pv("pv-b"));
  const startWatch = f.holdWatchStart();
  f.watch().end(new Error("watch closed"));
  // The loop has dropped everything and waits to start the next watch.
  await waitFor("the next watch being set up", () => f.versions() === 2);
  f.hold("pv-b");
  const early = f.cache.get("pv-b", signal());
  await waitFor("the read at the API", () => f.reads.length === 1);
  startWatch();
  await waitFor("the watch standing again", () => f.watches() === 2);
  f.release("pv-b");
  assert.equal((await early)?.metadata.name, "pv-b");
  await f.cache.get("pv-b", signal());
  assert.deepEqual(f.reads, ["pv-b", "pv-b"]);
});

test("an entry lives at most the TTL; the cache holds at most maxEntries, the least recently read going first", async (t) => {
  let now = 0;
  const short = await started(t, { ttlMs: 30, now: () => now });
  short.stored.set("pv-a", pv("pv-a"));
  await short.cache.get("pv-a", signal());
  now = 29;
  await short.cache.get("pv-a", signal());
  now = 30;
  await short.cache.get("pv-a", signal());
  assert.deepEqual(short.reads, ["pv-a", "pv-a"]);

  const small = await started(t, { maxEntries: 2 });
  for (const n of ["pv-1", "pv-2", "pv-3"]) small.stored.set(n, pv(n));
  for (const n of ["pv-1", "pv-2", "pv-3", "pv-2", "pv-1"]) await small.cache.get(n, signal());
  assert.deepEqual(small.reads, ["pv-1", "pv-2", "pv-3", "pv-1"], "pv-1 went first; pv-2 and pv-3 stayed");
});

test("without list/watch on PersistentVolumes (an older RBAC) it says so once, at warn, and reads on every request", async (t) => {
  const { lines, logger } = captureLogger("debug");
  const f = await started(t, { logger });
  f.stored.set("pv-a", pv("pv-a"));
  for (let i = 1; i <= 2; i++) {
    f.watch().end(new KubeError(403, "Forbidden", 'persistentvolumes is forbidden: cannot watch resource "persistentvolumes"'));
    await waitFor(`watch ${i + 1}`, () => f.watches() === i + 1);
  }
  f.watch().end(new Error("connection reset"));
  await waitFor("watch 4", () => f.watches() === 4);
  assert.deepEqual(
    lines.filter((l) => String(l["message"]).startsWith("PersistentVolume watch ended")).map((l) => l["level"]),
    ["warn", "debug", "debug"],
  );
});

test("a read made before the watch first stood is served but not kept", async (t) => {
  const f = fakeKube();
  const open = f.holdWatchStart();
  const cache = new PvCache(f.kube, 60_000, createLogger("error", "json"));
  t.after(() => cache.close());
  cache.start();
  f.stored.set("pv-a", pv("pv-a"));
  assert.equal((await cache.get("pv-a", signal()))?.metadata.name, "pv-a");
  open();
  await waitFor("the watch", () => f.watches() === 1);
  await cache.get("pv-a", signal());
  await cache.get("pv-a", signal());
  assert.deepEqual(f.reads, ["pv-a", "pv-a"], "read again once the watch stood, then served");
});

test("any TTL above 0 keeps a watch; 0 keeps none and every request reads", async (t) => {
  await started(t, { ttlMs: 1 });
  const f = fakeKube();
  const off = new PvCache(f.kube, 0, createLogger("error", "json"));
  t.after(() => off.close());
  off.start();
  f.stored.set("pv-a", pv("pv-a"));
  await off.get("pv-a", signal());
  await off.get("pv-a", signal());
  assert.deepEqual(f.reads, ["pv-a", "pv-a"]);
  assert.equal(f.versions() + f.watches(), 0, "no list, no watch");
});

test("close() ends the watch and serves nothing more from memory", async (t) => {
  const f = await started(t);
  f.stored.set("pv-a", pv("pv-a"));
  await f.cache.get("pv-a", signal());
  await f.cache.get("pv-a", signal());
  f.cache.close();
  assert.equal(f.watchSignal().aborted, true);
  await f.cache.get("pv-a", signal());
  assert.deepEqual(f.reads, ["pv-a", "pv-a"]);
});

test("a lost watch is tried again after 200 ms, doubling up to 10 s, and after 200 ms again once a watch delivered", async (t) => {
  const gate = gatedSleep();
  const f = await started(t, { sleep: gate.sleep });
  for (let i = 1; i <= 8; i++) {
    f.watch().end(new Error("connection reset"));
    await waitFor(`wait ${i}`, () => gate.waits.length === i);
    assert.equal(f.watches(), i, "no new watch before the wait is over");
    gate.wake();
    await waitFor(`watch ${i + 1}`, () => f.watches() === i + 1);
  }
  assert.deepEqual(gate.waits, [200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]);
  f.watch().emit("MODIFIED", pv("pv-z"));
  f.watch().end(new Error("connection reset"));
  await waitFor("the wait after a watch that delivered", () => gate.waits.length === 9);
  assert.equal(gate.waits[8], 200);
});

test("an entry read again after its TTL counts as the newest when the oldest must go", async (t) => {
  let now = 0;
  const f = await started(t, { ttlMs: 100, maxEntries: 3, now: () => now });
  for (const n of ["pv-z", "pv-x", "pv-y", "pv-w", "pv-v"]) f.stored.set(n, pv(n));
  const at = async (ms: number, name: string) => ((now = ms), await f.cache.get(name, signal()));
  await at(0, "pv-z");
  await at(4, "pv-x");
  await at(50, "pv-y");
  await at(105, "pv-x"); // expired: read again, now the newest
  await at(106, "pv-w"); // pv-z goes
  await at(107, "pv-v"); // pv-y goes
  await at(108, "pv-x");
  assert.deepEqual(f.reads, ["pv-z", "pv-x", "pv-y", "pv-x", "pv-w", "pv-v"], "pv-x, read again at 105, stayed");
});

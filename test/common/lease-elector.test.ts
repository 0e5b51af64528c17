// The leader election both programs share, against an in-memory Lease with resourceVersion
// semantics (a write with a stale version loses, as a 409 would).
import { test } from "node:test";
import assert from "node:assert/strict";
import { LeaseElector, type LeaseRecord, type LeaseStore, type StoredLease } from "../../common/election/lease-elector.js";
import { checkLeaseTimings } from "../../common/election/timings.js";
import { FlagError } from "../../common/config/flags.js";
import { createLogger } from "../../common/log/logger.js";
import { captureLogger } from "../support/capture-logger.js";
import { waitFor } from "../support/wait.js";

function memoryLease(): LeaseStore & { current: StoredLease | undefined; down: boolean } {
  let version = 0;
  const store = {
    current: undefined as StoredLease | undefined,
    down: false,
    async read() {
      if (store.down) throw new Error("API down");
      return store.current && { ...store.current };
    },
    async write(r: LeaseRecord, rv: string | undefined) {
      if (store.down) throw new Error("API down");
      if ((store.current?.resourceVersion ?? undefined) !== rv) return false;
      store.current = { ...r, resourceVersion: String(++version) };
      return true;
    },
  };
  return store;
}

const logger = createLogger("error", "json");
const timings = { leaseDurationMs: 600, renewDeadlineMs: 400, retryPeriodMs: 50 };
const elector = (store: LeaseStore, identity: string) => new LeaseElector({ store, logger, lease: "ns/l", identity, ...timings });

test("one of two candidates leads; stop() releases, and the other takes over at once", async () => {
  const store = memoryLease();
  const a = elector(store, "a");
  const b = elector(store, "b");
  const seen: string[] = [];
  a.on("leading", (on) => seen.push(`a:${on}`));
  b.on("leading", (on) => seen.push(`b:${on}`));
  a.start();
  await waitFor("a leads", () => a.isLeader);
  b.start();
  await waitFor("b has tried", () => store.current!.renewTimeMs > 0 && store.current!.holder === "a");
  assert.equal(b.isLeader, false);
  const released = Date.now();
  await a.stop();
  assert.notEqual(store.current?.holder, "a", "released (or already taken over)");
  await waitFor("b leads", () => b.isLeader);
  assert.ok(Date.now() - released < timings.leaseDurationMs, "no wait for the lease to expire");
  assert.equal(store.current!.transitions, 1);
  await b.stop();
  assert.deepEqual(seen, ["a:true", "a:false", "b:true", "b:false"]);
});

test("stop() while its winning write is in flight: the Lease it just took is released, not left to expire", async () => {
  const store = memoryLease();
  const write = store.write.bind(store);
  let landed!: () => void;
  const writing = new Promise<void>((r) => (landed = r));
  let answer!: () => void;
  // The first write lands in the API at once, but its answer reaches the candidate only later.
  store.write = async (r, rv, signal) => {
    const ok = await write(r, rv, signal);
    landed();
    await new Promise<void>((resolve) => (answer = resolve));
    return ok;
  };
  const a = elector(store, "a");
  a.start();
  await writing;
  assert.equal(store.current?.holder, "a", "the Lease is a's in the API");
  store.write = write;
  const stopped = a.stop();
  answer();
  await stopped;
  assert.equal(a.isLeader, false);
  assert.equal(store.current?.holder, "", "released on stop, though a never saw itself leading");
});

test("a holder that stops renewing (crash) is replaced only after the lease duration", async () => {
  const store = memoryLease();
  const now = Date.now();
  store.current = { holder: "crashed", renewTimeMs: now, acquireTimeMs: now, durationMs: timings.leaseDurationMs, transitions: 3, resourceVersion: "x" };
  const b = elector(store, "b");
  const started = Date.now();
  b.start();
  await waitFor("b leads", () => b.isLeader, { timeoutMs: 5_000 });
  assert.ok(Date.now() - started >= timings.leaseDurationMs, "took over before the record expired");
  assert.equal(store.current!.transitions, 4);
  await b.stop();
});

test("a leader that cannot renew for the renew deadline steps down", async () => {
  const store = memoryLease();
  const a = elector(store, "a");
  a.start();
  await waitFor("a leads", () => a.isLeader);
  store.down = true;
  await waitFor("a steps down", () => !a.isLeader, { timeoutMs: 5_000 });
  store.down = false;
  await waitFor("a leads again", () => a.isLeader, { timeoutMs: 5_000 });
  await a.stop();
});

test("client-go's timing rule names the flag that breaks it", () => {
  checkLeaseTimings({ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
  for (const [t, flag] of [
    [{ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 0 }, "leader-election-retry-period"],
    [{ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 9_000 }, "leader-election-renew-deadline"],
    [{ leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 }, "leader-election-lease-duration"],
  ] as const) {
    assert.throws(() => checkLeaseTimings(t), (e: Error) => e instanceof FlagError && e.flag === flag);
  }
});

test("a Lease outage is warned about once, its retries only at debug; the next outage is warned about again", async (t) => {
  const store = memoryLease();
  const { lines, logger: captured } = captureLogger("debug");
  const e = new LeaseElector({ store, logger: captured, lease: "ns/l", identity: "a", ...timings });
  const failures = (level: string) => lines.filter((l) => l["message"] === "leader election: Lease request failed" && l["level"] === level).length;
  t.after(() => e.stop());
  e.start();
  await waitFor("a leads", () => e.isLeader);
  for (const outage of [1, 2]) {
    const retriedBefore = failures("debug");
    store.down = true;
    await waitFor(`outage ${outage}: retried at least twice`, () => failures("debug") >= retriedBefore + 2);
    assert.equal(failures("warn"), outage, `outage ${outage}: one warning`);
    const renewedBefore = store.current!.renewTimeMs;
    store.down = false;
    await waitFor(`outage ${outage} over: renewed again`, () => e.isLeader && store.current!.renewTimeMs > renewedBefore);
  }
});

test("a write that fails (not a read) is an outage too: the candidate keeps trying and leads once writes work", async (t) => {
  const store = memoryLease();
  const write = store.write.bind(store);
  let failing = 3;
  store.write = async (r, rv, signal) => {
    if (failing-- > 0) throw new Error("connection reset during the write");
    return write(r, rv, signal);
  };
  const e = elector(store, "a");
  t.after(() => e.stop());
  e.start();
  await waitFor("a leads after the failed writes", () => e.isLeader);
  assert.equal(store.current!.holder, "a");
});

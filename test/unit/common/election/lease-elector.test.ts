// The leader election both programs share, against an in-memory Lease with resourceVersion
// semantics (a write with a stale version loses, as a 409 would).
import { test } from "node:test";
import assert from "node:assert/strict";
import { LeaseElector, type LeaseRecord, type LeaseStore, type StoredLease } from "../../../../common/election/lease-elector.js";
import { checkLeaseTimings } from "../../../../common/election/timings.js";
import { FlagError } from "../../../../common/config/flags.js";
import { createLogger } from "../../../../common/log/logger.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { waitFor } from "../../../support/wait.js";
import { delay } from "../../../../common/util/delay.js";

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

/** A Lease another candidate holds, renewed just now. */
function heldBy(store: { current: StoredLease | undefined }, holder: string, durationMs = 3_600_000, transitions = 0): void {
  const now = Date.now();
  store.current = { holder, renewTimeMs: now, acquireTimeMs: now, durationMs, transitions, resourceVersion: "x" };
}

const logger = createLogger("error", "json");
const timings = { leaseDurationMs: 600, renewDeadlineMs: 400, retryPeriodMs: 50 };
const elector = (store: LeaseStore, identity: string) => new LeaseElector({ store, logger, lease: "ns/l", identity, ...timings });

test("one of two candidates leads; stop() releases, and the other takes over at once", async (t) => {
  const store = memoryLease();
  // A lease far longer than any wait here: b can lead only because a released it, never because it expired.
  const long = { leaseDurationMs: 3_600_000, renewDeadlineMs: 2_400_000, retryPeriodMs: 50 };
  const a = new LeaseElector({ store, logger, lease: "ns/l", identity: "a", ...long });
  const b = new LeaseElector({ store, logger, lease: "ns/l", identity: "b", ...long });
  // Stopped whatever an assertion says: a candidate left running keeps the process alive.
  t.after(() => Promise.all([a.stop(), b.stop()]));
  const seen: string[] = [];
  a.on("leading", (on) => seen.push(`a:${on}`));
  b.on("leading", (on) => seen.push(`b:${on}`));
  a.start();
  await waitFor("a leads", () => a.isLeader);
  b.start();
  await waitFor("b has tried", () => store.current!.renewTimeMs > 0 && store.current!.holder === "a");
  assert.equal(b.isLeader, false);
  await a.stop();
  assert.notEqual(store.current?.holder, "a", "released (or already taken over)");
  if (store.current!.holder === "")
    assert.equal(store.current!.durationMs, 1_000, "released as client-go does: a 1 s duration, which the API accepts (0 it refuses)");
  await waitFor("b leads, long before the hour the lease would take to expire", () => b.isLeader);
  assert.equal(store.current!.transitions, 1);
  await b.stop();
  assert.deepEqual(seen, ["a:true", "a:false", "b:true", "b:false"]);
});

test("stop() while its winning write is in flight: the Lease it just took is released, not left to expire", async (t) => {
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
  t.after(() => (answer?.(), a.stop()));
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

test("a holder that stops renewing (crash) is replaced only after the lease duration", async (t) => {
  const store = memoryLease();
  heldBy(store, "crashed", timings.leaseDurationMs, 3);
  const b = elector(store, "b");
  t.after(() => b.stop());
  const started = Date.now();
  b.start();
  await waitFor("b leads", () => b.isLeader, { timeoutMs: 5_000 });
  assert.ok(Date.now() - started >= timings.leaseDurationMs, "took over before the record expired");
  assert.equal(store.current!.transitions, 4);
  await b.stop();
});

test("a leader that cannot renew for the renew deadline steps down, and says so", async (t) => {
  const store = memoryLease();
  const { lines, logger: captured } = captureLogger("warn");
  const a = new LeaseElector({ store, logger: captured, lease: "ns/l", identity: "a", ...timings });
  t.after(() => a.stop());
  a.start();
  await waitFor("a leads", () => a.isLeader);
  store.down = true;
  await waitFor("a steps down", () => !a.isLeader, { timeoutMs: 5_000 });
  assert.deepEqual(
    lines.filter((l) => String(l["message"]).includes("renew deadline")).map((l) => [l["level"], l["lease"]]),
    [["warn", "ns/l"]],
  );
  store.down = false;
  await waitFor("a leads again", () => a.isLeader, { timeoutMs: 5_000 });
});

test("client-go's timing rule names the flag that breaks it", () => {
  checkLeaseTimings({ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
  for (const [t, flag] of [
    [{ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 0 }, "leader-election-retry-period"],
    [{ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: -1 }, "leader-election-retry-period"],
    [{ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 9_000 }, "leader-election-renew-deadline"],
    [{ leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 }, "leader-election-lease-duration"],
  ] as const) {
    assert.throws(
      () => checkLeaseTimings(t),
      (e: Error) => e instanceof FlagError && e.flag === flag,
    );
  }
  // The smallest timings the rule allows are accepted: positive is positive.
  checkLeaseTimings({ leaseDurationMs: 3, renewDeadlineMs: 2, retryPeriodMs: 1 });
});

test("a Lease outage is warned about once (also one from the start), its retries only at debug; the next outage is warned about again", async (t) => {
  const store = memoryLease();
  const { lines, logger: captured } = captureLogger("debug");
  const e = new LeaseElector({ store, logger: captured, lease: "ns/l", identity: "a", ...timings });
  const failures = (level: string) => lines.filter((l) => l["message"] === "leader election: Lease request failed" && l["level"] === level).length;
  t.after(() => e.stop());
  // The API is down from the start: the first failure is an outage's first, so it warns.
  store.down = true;
  e.start();
  await waitFor("down from the start: retried", () => failures("debug") >= 1);
  assert.equal(failures("warn"), 1, "down from the start: one warning");
  store.down = false;
  await waitFor("a leads", () => e.isLeader);
  for (const outage of [2, 3]) {
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

test("a candidate waits retry period x [1, 1.2) between tries (client-go's jitter); the leader renews every retry period exactly", async (t) => {
  const store = memoryLease();
  heldBy(store, "other");
  const waits: { ms: number; leading: boolean }[] = [];
  const e = new LeaseElector({
    store,
    logger,
    lease: "ns/l",
    identity: "b",
    ...timings,
    sleep: (ms, signal) => {
      waits.push({ ms, leading: e.isLeader });
      return delay(1, signal);
    },
  });
  t.after(() => e.stop());
  e.start();
  await waitFor("30 tries as a candidate", () => waits.length >= 30);
  store.current = { ...store.current!, holder: "", resourceVersion: "y" };
  await waitFor("10 renewals as the leader", () => waits.filter((w) => w.leading).length >= 10);
  const candidate = waits.filter((w) => !w.leading).map((w) => w.ms);
  for (const ms of candidate) assert.ok(ms >= timings.retryPeriodMs && ms < timings.retryPeriodMs * 1.2, `candidate waited ${ms} ms`);
  assert.ok(new Set(candidate).size > 1, `candidates' waits are spread, not all ${candidate[0]} ms`);
  assert.deepEqual(new Set(waits.filter((w) => w.leading).map((w) => w.ms)), new Set([timings.retryPeriodMs]));
});

test("stop() returns only once the request in flight has ended, so no Lease request outlives it", async (t) => {
  const store = memoryLease();
  let inFlight = 0;
  const counted =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    async (...args: A) => {
      inFlight++;
      try {
        return await call(...args);
      } finally {
        inFlight--;
      }
    };
  const write = store.write.bind(store);
  store.read = counted(store.read.bind(store));
  store.write = counted(write);
  const a = elector(store, "a");
  t.after(() => a.stop());
  a.start();
  await waitFor("a leads", () => a.isLeader);
  // The next renewal hangs until it is cancelled, and its cancellation is answered a little later,
  // as an HTTP request's is; writes after it (the release) go through, answered after 20 ms.
  let hung = false;
  store.write = counted((r, rv, signal) => {
    if (hung) return delay(20).then(() => write(r, rv, signal));
    hung = true;
    return new Promise<boolean>((_, reject) => signal.addEventListener("abort", () => setTimeout(() => reject(new Error("aborted")), 20), { once: true }));
  });
  await waitFor("the renewal hangs", () => hung);
  await a.stop();
  assert.equal(inFlight, 0, "a Lease request still in flight after stop() returned");
  assert.equal(a.isLeader, false);
  assert.equal(store.current!.holder, "", "released after the hung renewal ended");
  assert.equal(store.current!.durationMs, 1_000);
});

test("a Lease request gets at least 1 s, even when half the renew deadline is shorter", async (t) => {
  const store = memoryLease();
  let abortedAfterMs: number | undefined;
  const read = store.read.bind(store);
  store.read = (signal) => {
    if (abortedAfterMs !== undefined) return read(signal);
    const started = Date.now();
    return new Promise((_, reject) =>
      signal.addEventListener(
        "abort",
        () => {
          abortedAfterMs ??= Date.now() - started;
          reject(new Error("timed out"));
        },
        { once: true },
      ),
    );
  };
  const e = elector(store, "a"); // renew deadline 400 ms: half of it would be 200 ms
  t.after(() => e.stop());
  e.start();
  await waitFor("the first read timed out", () => abortedAfterMs !== undefined, { timeoutMs: 5_000 });
  assert.ok(abortedAfterMs! >= 950, `the read was cancelled after ${abortedAfterMs} ms`);
});

test("a leader that misses renewals for less than the renew deadline stays the leader", async (t) => {
  const store = memoryLease();
  // A renew deadline no pause of a busy machine reaches: what is tested is the count of misses, not the pace.
  const a = new LeaseElector({ store, logger, lease: "ns/l", identity: "a", leaseDurationMs: 60_000, renewDeadlineMs: 40_000, retryPeriodMs: 50 });
  const seen: boolean[] = [];
  a.on("leading", (on) => seen.push(on));
  t.after(() => a.stop());
  a.start();
  await waitFor("a leads", () => a.isLeader);
  // Two failed renewals (~100 ms at a 50 ms retry period), well inside the renew deadline.
  let failed = 0;
  const write = store.write.bind(store);
  store.write = async (r, rv, signal) => {
    if (failed < 2) {
      failed++;
      throw new Error("connection reset");
    }
    return write(r, rv, signal);
  };
  const renewed = store.current!.renewTimeMs;
  await waitFor("renewed again after the two failures", () => failed === 2 && store.current!.renewTimeMs > renewed);
  assert.deepEqual(seen, [true], "led throughout");
});

test("a leader that cannot release its Lease at stop() warns; a candidate that never led says it at debug only", async (t) => {
  for (const led of [true, false]) {
    const store = memoryLease();
    if (!led) heldBy(store, "other");
    const { lines, logger: captured } = captureLogger("debug");
    const e = new LeaseElector({ store, logger: captured, lease: "ns/l", identity: "a", ...timings });
    t.after(() => ((store.down = false), e.stop()));
    e.start();
    await waitFor(led ? "a leads" : "a has tried", () => (led ? e.isLeader : store.current!.holder === "other"));
    store.down = true;
    await e.stop();
    const said = lines.filter((l) => String(l["message"]).startsWith("could not release the Lease"));
    assert.deepEqual(
      said.map((l) => [l["level"], l["lease"], l["error"]]),
      led ? [["warn", "ns/l", "API down"]] : [["debug", "ns/l", "API down"]],
    );
  }
});

// log/repeats: lines that can repeat per call (a failing PV, a refused caller) are written once,
// counted while they repeat, and summed up when the window ends. In process with mocked time, so
// the window and the first/last times are exact.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { RepeatedLines } from "../../../../sidecar/log/repeats.js";
import { captureLogger } from "../../../support/capture-logger.js";

const START = Date.parse("2026-12-01T10:00:00.000Z");

function repeats(t: TestContext, windowMs = 1_000, maxKinds = 256) {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: START });
  const { lines, logger } = captureLogger("debug");
  return { r: new RepeatedLines(logger, windowMs, maxKinds), lines };
}

test("the first line of a kind at once; identical ones counted; one summary when the window ends, with the count, first and last time and the last one's fields; the key never logged", (t) => {
  const { r, lines } = repeats(t);
  r.log("warn", "k-secretish", "call failed", { pv: "pv-a", attempt: 1 });
  assert.deepEqual(lines, [{ level: "warn", message: "call failed", pv: "pv-a", attempt: 1 }]);
  t.mock.timers.tick(100);
  r.log("warn", "k-secretish", "call failed", { pv: "pv-a", attempt: 2 });
  t.mock.timers.tick(300);
  r.log("warn", "k-secretish", "call failed", { pv: "pv-a", attempt: 3 });
  assert.equal(lines.length, 1, "repeats are only counted");
  t.mock.timers.tick(599);
  assert.equal(lines.length, 1, "the window has not ended");
  t.mock.timers.tick(1);
  assert.deepEqual(lines[1], {
    level: "warn",
    message: "call failed (repeated)",
    pv: "pv-a",
    attempt: 3,
    repeated: 2,
    first: new Date(START).toISOString(),
    last: new Date(START + 400).toISOString(),
  });
  assert.ok(!JSON.stringify(lines).includes("k-secretish"));
});

test("kinds are told apart by key, each summed up on its own; one that did not repeat gets no summary", (t) => {
  const { r, lines } = repeats(t);
  r.log("warn", "a", "call failed", { pv: "pv-a" });
  r.log("info", "b", "call refused", { reason: "unauthenticated" });
  r.log("warn", "c", "call failed", { pv: "pv-c" });
  r.log("info", "b", "call refused", { reason: "unauthenticated" });
  r.log("warn", "a", "call failed", { pv: "pv-a" });
  r.log("info", "b", "call refused", { reason: "unauthenticated" });
  assert.equal(lines.length, 3);
  t.mock.timers.tick(1_000);
  const summaries = lines.slice(3).map((l) => [l["level"], l["message"], l["repeated"]]);
  assert.deepEqual(summaries, [
    ["warn", "call failed (repeated)", 1],
    ["info", "call refused (repeated)", 2],
  ]);
});

test("after the window a line of the same kind is new again: written at once, and a later window counts afresh", (t) => {
  const { r, lines } = repeats(t);
  r.log("warn", "a", "call failed", {});
  r.log("warn", "a", "call failed", {});
  t.mock.timers.tick(1_000);
  r.log("warn", "a", "call failed", { n: 2 });
  assert.equal(lines.length, 3);
  assert.deepEqual(lines[2], { level: "warn", message: "call failed", n: 2 });
  r.log("warn", "a", "call failed", {});
  t.mock.timers.tick(1_000);
  assert.equal(lines.at(-1)!["repeated"], 1, "the second window's own count");
});

test("flush() sums up at once (at shutdown) and ends the window: nothing more is written when it would have ended", (t) => {
  const { r, lines } = repeats(t);
  r.log("error", "a", "call failed", {});
  r.log("error", "a", "call failed", {});
  r.flush();
  assert.equal(lines.length, 2);
  assert.equal(lines[1]!["repeated"], 1);
  t.mock.timers.tick(5_000);
  assert.equal(lines.length, 2);
  r.flush();
  assert.equal(lines.length, 2, "nothing pending, nothing written");
});

test("a window that starts after flush() lasts its whole length: the flushed window's timer does not end it early", (t) => {
  const { r, lines } = repeats(t);
  r.log("warn", "a", "call failed", {});
  r.log("warn", "a", "call failed", {});
  t.mock.timers.tick(500);
  r.flush();
  r.log("warn", "b", "call refused", {});
  r.log("warn", "b", "call refused", {});
  t.mock.timers.tick(500);
  assert.equal(lines.length, 3, "when the flushed window would have ended, the new one goes on");
  t.mock.timers.tick(500);
  assert.deepEqual(
    lines.slice(3).map((l) => [l["message"], l["repeated"]]),
    [["call refused (repeated)", 1]],
  );
});

test("past maxKinds kinds at once, a new kind is written every time rather than tracked; those tracked are still summed up", (t) => {
  const { r, lines } = repeats(t, 1_000, 2);
  r.log("warn", "a", "m", { k: "a" });
  r.log("warn", "b", "m", { k: "b" });
  r.log("warn", "c", "m", { k: "c" });
  r.log("warn", "c", "m", { k: "c" });
  r.log("warn", "a", "m", { k: "a" });
  assert.deepEqual(
    lines.map((l) => l["k"]),
    ["a", "b", "c", "c"],
  );
  t.mock.timers.tick(1_000);
  assert.deepEqual(
    lines.slice(4).map((l) => [l["k"], l["repeated"]]),
    [["a", 1]],
  );
});

test("no timer while nothing repeats, one per window however many kinds, and it never keeps the process alive", (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: START });
  const { logger } = captureLogger("debug");
  const timers: { unrefd: boolean }[] = [];
  const real = globalThis.setTimeout;
  t.mock.method(globalThis, "setTimeout", (fn: () => void, ms: number) => {
    const handle = real(fn, ms);
    const seen = { unrefd: false };
    timers.push(seen);
    const unref = handle.unref.bind(handle);
    return Object.assign(handle, { unref: () => ((seen.unrefd = true), unref()) });
  });
  const r = new RepeatedLines(logger, 60_000);
  assert.equal(timers.length, 0);
  r.log("warn", "a", "m", {});
  r.log("warn", "b", "m", {});
  r.log("warn", "a", "m", {});
  assert.equal(timers.length, 1);
  assert.ok(timers[0]!.unrefd);
  r.flush();
  r.log("warn", "a", "m", {});
  assert.equal(timers.length, 2, "a new window, a new timer");
  r.flush();
});

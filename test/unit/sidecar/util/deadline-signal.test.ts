// withDeadline: the relay's per-call signal (parent's cancellation or the deadline, whichever first).
import { test } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { endedByDeadline, withDeadline } from "../../../../sidecar/util/deadline-signal.js";

const until = (signal: AbortSignal) => new Promise<unknown>((resolve) => signal.addEventListener("abort", () => resolve(signal.reason), { once: true }));

test("withDeadline: fires at the deadline, follows the parent's cancellation, and leaves nothing behind", async () => {
  const parent = new AbortController();
  const reason = await withDeadline(parent.signal, Date.now() + 20, until);
  assert.equal((reason as DOMException).name, "TimeoutError", "the deadline fired");

  const cancelled = withDeadline(parent.signal, Date.now() + 60_000, until);
  parent.abort(new Error("caller left"));
  assert.equal(((await cancelled) as Error).message, "caller left", "the parent's reason is passed on");

  const quiet = new AbortController();
  assert.equal(await withDeadline(quiet.signal, Date.now() + 60_000, async (s) => s.aborted), false);
  assert.equal(getEventListeners(quiet.signal, "abort").length, 0, "no listener left on the parent");
  assert.equal(await withDeadline(quiet.signal, Infinity, async (s) => s === quiet.signal), true, "no deadline: the parent itself");
});

test("withDeadline: the deadline fires when it comes, not at once", async () => {
  const deadline = Date.now() + 100;
  const firedAt = await withDeadline(new AbortController().signal, deadline, (s) => until(s).then(() => Date.now()));
  // A timer never fires before its time; 20 ms for the event loop's clock, which may lag Date.now().
  assert.ok(firedAt >= deadline - 20, `fired ${deadline - firedAt} ms before the deadline`);
});

test("endedByDeadline: true for a signal its own deadline ended, false when the parent ended it first or nothing did", async () => {
  const seen: AbortSignal[] = [];
  const keep = (signal: AbortSignal) => (seen.push(signal), new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true })));
  await withDeadline(new AbortController().signal, Date.now() + 20, keep);
  const parent = new AbortController();
  const byParent = withDeadline(parent.signal, Date.now() + 60_000, keep);
  parent.abort(new DOMException("gone", "TimeoutError"));
  await byParent;
  await withDeadline(new AbortController().signal, Date.now() + 60_000, async (signal) => void seen.push(signal));
  assert.deepEqual(
    seen.map((s) => endedByDeadline(s)),
    [true, false, false],
  );
  assert.equal(endedByDeadline(undefined), false);
});

import assert from "node:assert/strict";
import { test } from "node:test";
import { withDeadline } from "../../../../common/util/deadline.js";

const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

test("the signal aborts at the deadline (TimeoutError) or with the parent (its reason)", async () => {
  const late = await withDeadline(20, undefined, (signal) => new Promise<unknown>((resolve) => signal.addEventListener("abort", () => resolve(signal.reason))));
  assert.equal((late as DOMException).name, "TimeoutError");
  const parent = new AbortController();
  const why = new Error("superseded");
  const cancelled = withDeadline(
    60_000,
    parent.signal,
    (signal) => new Promise<unknown>((resolve) => signal.addEventListener("abort", () => resolve(signal.reason))),
  );
  parent.abort(why);
  assert.equal(await cancelled, why);
  assert.equal(await withDeadline(60_000, parent.signal, async (signal) => signal.aborted), true, "an aborted parent: aborted from the start");
});

test("nothing outlives the operation: no timer left, no listener on the parent, however long the deadline", async () => {
  const parent = new AbortController();
  let added = 0;
  let removed = 0;
  const add = parent.signal.addEventListener.bind(parent.signal);
  const remove = parent.signal.removeEventListener.bind(parent.signal);
  parent.signal.addEventListener = ((...a: Parameters<typeof add>) => (added++, add(...a))) as typeof add;
  parent.signal.removeEventListener = ((...a: Parameters<typeof remove>) => (removed++, remove(...a))) as typeof remove;
  const before = timers();
  for (let i = 0; i < 1000; i++) await withDeadline(180_000, parent.signal, async () => i);
  await assert.rejects(
    withDeadline(180_000, parent.signal, async () => Promise.reject(new Error("failed"))),
    /failed/,
  );
  assert.equal(timers(), before, "every timer cleared");
  assert.equal(removed, added, "every listener on the parent removed");
});

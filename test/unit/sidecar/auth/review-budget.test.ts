// What verifying strangers may cost the API server: reviews at once are bounded, and invalid
// tokens are reviewed at most a burst and then a rate; a token seen valid is never held back.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ReviewBudget } from "../../../../sidecar/auth/review-budget.js";
import { DomainError } from "../../../../sidecar/errors.js";

const signal = new AbortController().signal;
const refusedKind = (p: Promise<unknown>) =>
  p.then(
    () => "served",
    (e: unknown) => (e instanceof DomainError ? e.kind : String(e)),
  );

test("invalid tokens: a burst is reviewed, then one per 1/rate s; others are refused RESOURCE_EXHAUSTED without a review", async () => {
  let now = 0;
  const budget = new ReviewBudget({ failedBurst: 3, failedPerSecond: 2, now: () => now });
  let reviews = 0;
  const garbage = (i: number) =>
    refusedKind(
      budget.review(
        `bad-${i}`,
        signal,
        async () => (reviews++, false),
        (ok) => ok,
      ),
    );
  const answers: string[] = [];
  for (let i = 0; i < 10; i++) answers.push(await garbage(i));
  assert.deepEqual(answers, ["served", "served", "served", ...Array(7).fill("ResourceExhausted")], "the burst, then refusals");
  assert.equal(reviews, 3);
  now += 1000; // two more per second
  for (let i = 10; i < 20; i++) await garbage(i);
  assert.equal(reviews, 5, "at most the rate after the burst, however many arrive");
});

test("a token seen valid is reviewed (and served) while garbage keeps the budget empty; a new valid token too while the budget lasts", async () => {
  let now = 0;
  const budget = new ReviewBudget({ failedBurst: 1, failedPerSecond: 1, now: () => now });
  /** The answer to a call with token `key`, which the API finds valid or not. */
  const ask = (key: string, isValid: boolean) =>
    refusedKind(
      budget.review(
        key,
        signal,
        async () => isValid,
        (ok) => ok,
      ),
    );
  assert.equal(await ask("good", true), "served");
  assert.equal(await ask("bad-1", false), "served", "reviewed: the budget had one");
  assert.equal(await ask("bad-2", false), "ResourceExhausted");
  assert.equal(await ask("new-good", true), "ResourceExhausted", "a stranger waits for the budget");
  assert.equal(await ask("good", true), "served", "the known caller is not held back");
  now += 1000;
  assert.equal(await ask("new-good", true), "served");
});

test("reviews at once are bounded: past those in flight and those waiting, RESOURCE_EXHAUSTED; a waiter runs when one ends", async () => {
  const budget = new ReviewBudget({ atOnce: 2, waiting: 1 });
  const release: (() => void)[] = [];
  let inFlight = 0;
  let most = 0;
  const held = (key: string) =>
    budget.review(
      key,
      signal,
      () =>
        new Promise<boolean>((resolve) => {
          inFlight++;
          most = Math.max(most, inFlight);
          release.push(() => (inFlight--, resolve(true)));
        }),
      (ok) => ok,
    );
  const a = held("a");
  const b = held("b");
  const c = held("c");
  assert.equal(await refusedKind(held("d")), "ResourceExhausted");
  assert.equal(release.length, 2, "two in flight, one waiting");
  release.shift()!();
  await a;
  await new Promise((r) => setImmediate(r));
  assert.equal(release.length, 2, "the waiter runs");
  for (const r of release.splice(0)) r();
  await Promise.all([b, c]);
  assert.equal(most, 2);
});

test("invalid tokens arriving at once spend no more than the budget: a review is paid for before it starts; one the API could not answer is refunded", async () => {
  const budget = new ReviewBudget({ failedBurst: 4, failedPerSecond: 0, atOnce: 100, waiting: 100, now: () => 0 });
  let reviews = 0;
  const answers = await Promise.all(
    Array.from({ length: 30 }, (_, i) =>
      refusedKind(
        budget.review(
          `bad-${i}`,
          signal,
          async () => (reviews++, await new Promise((r) => setImmediate(r)), false),
          (ok) => ok,
        ),
      ),
    ),
  );
  assert.equal(reviews, 4, "thirty at once, four reviewed");
  assert.equal(answers.filter((a) => a === "ResourceExhausted").length, 26);
  const outage = new ReviewBudget({ failedBurst: 1, failedPerSecond: 0, now: () => 0 });
  const down = () =>
    refusedKind(
      outage.review(
        "t",
        signal,
        () => Promise.reject<boolean>(new Error("API down")),
        (ok: boolean) => ok,
      ),
    );
  assert.equal(await down(), "Error: API down");
  assert.equal(await down(), "Error: API down", "an unanswered review spends nothing");
});

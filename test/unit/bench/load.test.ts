// The bench's load helpers: the order the relay's paths take turns in, and runs pooled as one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { summarize, turns } from "../../bench/load.js";

test("turns: each round starts one path later, so no path always runs first or after the same one", () => {
  assert.deepEqual(turns(["direct", "sidecar", "bare"], 4), [
    ["direct", "sidecar", "bare"],
    ["sidecar", "bare", "direct"],
    ["bare", "direct", "sidecar"],
    ["direct", "sidecar", "bare"],
  ]);
});

test("summarize: the rounds of one path count as one run (latencies pooled, wall times added)", () => {
  const r = summarize(1, [
    { latencies: [3, 1], wallMs: 500 },
    { latencies: [2, 4], wallMs: 1500 },
  ]);
  assert.deepEqual(r, { concurrency: 1, calls: 4, wallMs: 2000, p50Ms: 2, p99Ms: 4, throughputPerS: 2 });
});

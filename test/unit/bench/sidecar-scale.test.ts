// The cluster bench's real sidecar at two cluster sizes is run three times side by side; of each
// size, every figure is the median of its runs, each figure on its own (one run's GC moves its
// peak RSS without moving its CPU).
import { test } from "node:test";
import assert from "node:assert/strict";
import { medianOfRuns, type SidecarAtSize } from "../../bench/sidecar-scale.js";

const run = (cpuMs: number, peakRssBytes: number, watchEvents = 0): SidecarAtSize => ({ pvs: 1000, cpuMs, peakRssBytes, watchEvents, requests: 4, changes: 600, checks: 600 });

test("of each figure the median of the runs, taken figure by figure", () => {
  const m = medianOfRuns([run(720, 99, 3), run(590, 96, 0), run(560, 101, 1)]);
  assert.deepEqual([m.pvs, m.cpuMs, m.peakRssBytes, m.watchEvents, m.requests], [1000, 590, 99, 1, 4]);
});

test("an even count takes the lower middle; one run is itself", () => {
  assert.equal(medianOfRuns([run(700, 1), run(600, 1)]).cpuMs, 600);
  assert.deepEqual(medianOfRuns([run(650, 97)]), run(650, 97));
});

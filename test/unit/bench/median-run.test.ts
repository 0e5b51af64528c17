// The headline's restart cases are run three times in a full bench and the median run reported:
// which run that is, and that every run's numbers stay beside it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { medianRun, type RestartResult } from "../../bench/restart.js";
import { checkTargets } from "../../bench/report-restart.js";

const run = (floorMs: number, healedMs: number, tag: string, bareFloorMs = floorMs + 100, grpcJsFloorMs = bareFloorMs + 50) =>
  ({ title: tag, floor: { wallMs: floorMs }, bareFloor: { wallMs: bareFloorMs }, grpcJsFloor: { wallMs: grpcJsFloorMs }, healer: { backToLastHealedMs: healedMs } }) as unknown as RestartResult;

test("the run with the median ratio is reported, with every run's floors and heal time in the order they ran", () => {
  const runs = [run(1000, 1900, "slow", 1300, 1400), run(600, 700, "fast", 650, 690), run(500, 700, "middle", 800, 610)];
  const m = medianRun(runs);
  assert.equal(m.title, "middle", "ratios 1.9, 1.17, 1.4: the median is 1.4");
  assert.deepEqual(m.runs, [
    { floorMs: 1000, bareFloorMs: 1300, grpcJsFloorMs: 1400, backToLastHealedMs: 1900 },
    { floorMs: 600, bareFloorMs: 650, grpcJsFloorMs: 690, backToLastHealedMs: 700 },
    { floorMs: 500, bareFloorMs: 800, grpcJsFloorMs: 610, backToLastHealedMs: 700 },
  ]);
  const one = medianRun([run(500, 700, "only")]);
  assert.equal(one.title, "only");
  assert.equal(one.runs, undefined, "one run: nothing to show beside it");
});

test("the ratio targets give the median run's verdict and how many runs met them; a single run says only its own", () => {
  const apiRequests = { controllerReadsPerHeal: 0, controllerPerHeal: 1, sidecarsPerHeal: 1 };
  const asCase = (r: RestartResult, nodes: number, volumesPerNode: number) =>
    ({ ...r, fleet: { nodes, volumesPerNode }, volumes: nodes * volumesPerNode, apiRequests }) as unknown as RestartResult;
  // One node: ratios 1.4, 1.6, 1.7 (median 1.6, NOT met; one run of three met it). The fleet: one run of 1.2.
  const oneNode = asCase(medianRun([run(1000, 1600, "a"), run(1000, 1400, "b"), run(1000, 1700, "c")]), 1, 500);
  const fleet = asCase(medianRun([run(1000, 1200, "only")]), 20, 50);
  const [one, many] = checkTargets({ oneNode, fleet });
  assert.deepEqual(one, { what: "500 volumes, 1 node: drivers back -> last HEALED <= 1.5x the floor", met: false, measured: "1.60x (median of 3 runs; 1 of 3 at or under 1.5x)" });
  assert.deepEqual(many, { what: "20 nodes x 50 volumes: drivers back -> last HEALED <= 1.5x the floor", met: true, measured: "1.20x" });
});

// Smoke test of `npm run bench`: the quick mode still runs end to end, prints its headline, its
// four tables and the sidecar's targets (soak included) and writes its JSON, and stops what it started.
// Nothing here says anything about speed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { startTs, tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";
import { alive, pidsIn } from "../../demo/liveness.js";
import type { Results } from "../../bench/report.js";

test("bench --quick prints the restart-heal headline, the relay, burst, memory and overload tables and the sidecar's targets, and writes the JSON results", { timeout: 480_000 }, async (t) => {
  const dir = tempDir("bench-quick-");
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, "results.json");
  // Two runs of each headline case: the median run, every run's ratio and how many met the target.
  const bench = startTs("test/bench/bench.ts", ["--quick", "--out", out, "--restart-runs", "2"]);
  const code = await bench.exited;
  const stdout = bench.stdout();
  assert.equal(code, 0, `bench exit code\n${stdout}\n${bench.stderr()}`);

  assert.match(stdout, /^csi-addons-healer bench \(quick\), \d{4}-/m);
  assert.match(stdout, /^Headline: time to heal after a node-plugin restart \(driver heal 5 ms; controller --per-node-concurrency 8 --max-concurrent-heals 2048/m);
  for (const measure of ["floor: the same heals straight to the driver\\(s\\)", "drivers back -> last volume HEALED", "heal phase: first heal at a driver -> last HEALED"]) {
    assert.match(stdout, new RegExp(`^ +${measure} +\\d+ ms +\\d+ ms$`, "m"), measure);
  }
  assert.match(stdout, /^ +\.\.\. \/ floor +[\d.]+x +[\d.]+x$/m);
  assert.match(stdout, /^ +the same through a bare node:http2 relay per driver +\d+ ms +\d+ ms$/m);
  assert.match(stdout, /^ +\.\.\. \/ floor: what one more hop costs, no more +[\d.]+x +[\d.]+x$/m);
  assert.match(stdout, /^ +the same through a grpc-js relay per driver +\d+ ms +\d+ ms$/m);
  assert.match(stdout, /^ +\.\.\. \/ floor: that hop through the decided stack +[\d.]+x +[\d.]+x$/m);
  assert.match(stdout, /^ +API requests per healed volume: controller +[\d.]+ +[\d.]+$/m);
  assert.match(stdout, /^ +API requests per healed volume: sidecars \(PV, VA, \.\.\.\) +[\d.]+ +[\d.]+$/m);
  assert.match(stdout, /^ +(met|NOT met) +\d+ volumes, 1 node: drivers back -> last HEALED <= 1\.5x the floor: [\d.]+x \(median of 2 runs; [012] of 2 at or under 1\.5x\)$/m);
  assert.match(stdout, /^ +\.\.\. \/ floor, each run \(this column is the median\) +[\d.]+x [\d.]+x +[\d.]+x [\d.]+x$/m);
  assert.match(stdout, /^ +the controller's work queue at cluster scale: 5,000 checks queued at once \(100 nodes x 50 volumes.*all ran in [\d.]+ ms, the event loop held at most [\d.]+ ms$/m);
  assert.match(stdout, /^ +the controller's informers at cluster scale: 20 Nodes, 1,000 PVs and 1,000 VolumeAttachments as a cluster writes them, NODE_OPTIONS="--max-old-space-size=\d+.*listed in [\d.]+ ms; RSS [\d.]+ MiB after, [\d.]+ MiB at the peak \(\d+% of deploy\/'s \d+Mi\); V8 heap in use [\d.]+ MiB$/m);
  assert.match(stdout, /^1\. Relay overhead: GetVolumeHealth/m);
  for (const c of [1, 64]) {
    // direct, then via sidecar, bare relay and grpc-js relay, each with its ratio to direct
    for (const measure of ["p50 latency", "p99 latency", "throughput"]) {
      const relayed = " +[\\d.,]+ ?(ms|/s) +[\\d.]+x".repeat(3);
      assert.match(stdout, new RegExp(`^ +${c} at once +${measure} +[\\d.,]+ ?(ms|/s)${relayed}$`, "m"), `${c} at once ${measure}`);
    }
    assert.match(stdout, new RegExp(`^ +${c} at once +relay's CPU per call +-${" +\\d+ us +-".repeat(3)}$`, "m"), `${c} at once CPU per call`);
  }
  assert.match(stdout, /^2\. Heal-all burst: \d+ volumes on one node, driver heal delay 5 ms, --max-inflight 32/m);
  assert.match(stdout, /^ +wall time +[\d.]+ ms +[\d.]+ ms +[\d.]+x$/m);
  assert.match(stdout, /^ +Kubernetes API requests per heal +- +[\d.]+ +-$/m);
  assert.match(stdout, /^ +again, the same sidecar warm: wall time +[\d.]+ ms +[\d.]+ ms +[\d.]+x$/m);
  assert.match(stdout, /^ +the same burst through a fresh grpc-js relay: wall time +[\d.]+ ms +[\d.]+ ms +[\d.]+x$/m);
  assert.match(stdout, /^3\. Sidecar process/m);
  assert.match(stdout, /^ +idle RSS .* [\d.]+ MiB$/m);
  assert.match(stdout, /^ +beside it: the bare node:http2 relay, idle .* [\d.]+ MiB$/m);
  assert.match(stdout, /^ +and the grpc-js relay, idle \(grpc-js, winston, prom-client loaded, one call made\) +[\d.]+ MiB$/m);
  assert.match(stdout, /^ +beside it: the grpc-js relay's peak RSS in the same burst +[\d.]+ MiB$/m);
  assert.match(stdout, /^ +"driver ready" -> "ready: SERVING" +[\d.]+ ms \([\d.]+ ms - [\d.]+ ms\)$/m);
  assert.match(stdout, /^ +process start -> SERVING \(driver already up\), median of 2 starts +[\d.]+ ms +<= 300 ms +(yes|NO) +- +-$/m);
  assert.match(stdout, /^4\. Sustained overload: \d+ callers/m);
  assert.match(stdout, /^ +under deploy\/'s settings: NODE_OPTIONS="--max-old-space-size=\d+/m);
  assert.match(stdout, /^ +and as the image starts the sidecar in a pod that sets no NODE_OPTIONS: its ENTRYPOINT script alone, NODE_OPTIONS unset$/m);
  assert.match(stdout, /^5\. The sidecar's targets, this run, the soak included \(met: \d+ of 13\)/m);
  for (const row of ["Kubernetes API requests per repeated health check", "driver back -> SERVING", "soak: calls answered / sent"]) {
    assert.match(stdout, new RegExp(`^ {2}${row}.* (yes|NO) +- +-$`, "m"), row);
  }
  // The measures the two relays bound show what each measured beside them.
  for (const row of ["GetVolumeHealth p50, via sidecar / direct, 1 caller", "throughput at 64 callers, via sidecar / direct"]) {
    assert.match(stdout, new RegExp(`^ {2}${row} .* (yes|NO) +[\\d.]+x +[\\d.]+x$`, "m"), row);
  }
  assert.match(stdout, /^ {2}idle RSS .* (yes|NO) +[\d.]+ MiB +[\d.]+ MiB$/m);
  assert.match(stdout, /^ {2}heal-all burst, \d+ volumes, via sidecar \/ driver alone .* (yes|NO) +- +[\d.]+x$/m);
  assert.match(stdout, /^ {2}peak RSS in the \d+-volume burst .* (yes|NO) +- +[\d.]+ MiB$/m);
  assert.match(stdout, /^ {3}The same relay targets read against the grpc-js relay, the floor of any relay on the decided stack \(met: \d of 6\)$/m);
  assert.match(stdout, /^ {2}one-node restart heal, \d+ volumes, drivers back -> last HEALED \/ grpc-js relay floor +[\d.]+x \(median of 2 runs; [012] of 2 at or under 1\.3x\) +<= 1\.3x +(yes|NO)$/m);
  assert.match(stdout, /^6\. A cluster: 20 nodes x 10 volumes \(200\), the node plugin's DaemonSet upgraded 2 waves of 50%/m);
  assert.match(stdout, /^ {3}The cluster's targets, this run \(met: \d+ of 11\)$/m);
  for (const row of ["per node, new sidecar back -> its last volume HEALED, p99", "API writes per healed volume", "lists of every object of a resource during the rollout", "real sidecar watch events received"]) {
    assert.match(stdout, new RegExp(`^ {2}${row}.* (yes|NO)$`, "m"), row);
  }
  assert.match(stdout, new RegExp(`results written to ${out}`));

  const r = JSON.parse(readFileSync(out, "utf8")) as Results;
  assert.equal(r.mode, "quick");
  assert.equal(r.node, process.version);
  assert.ok(!Number.isNaN(Date.parse(r.timestamp)));
  assert.ok(r.machine.cpus > 0 && r.machine.totalMemoryBytes > 0);
  assert.deepEqual(r.relay.map((x) => x.concurrency), [1, 64]);
  assert.ok(r.relay.every((x) => x.direct.p50Ms > 0 && x.sidecar.p99Ms >= x.sidecar.p50Ms));
  for (const relay of ["bare", "grpcJs"] as const) {
    assert.ok(r.relay.every((x) => x[relay].p99Ms >= x[relay].p50Ms && x[relay].p50Ms > 0 && x.cpuUsPerCall[relay] > 0), JSON.stringify(r.relay));
  }
  assert.ok(r.relay.every((x) => x.cpuUsPerCall.sidecar > 0));
  assert.ok(r.memory.bareRelayIdleRssBytes > 0 && r.memory.grpcJsRelayIdleRssBytes > 0);
  assert.equal(r.burst.sidecar.outcomes["HEALED"], r.burst.volumes, "every volume healed, none refused");
  assert.ok(r.burst.sidecar.peakDriverCalls <= 32, `--max-inflight 32 held: ${r.burst.sidecar.peakDriverCalls}`);
  assert.ok(r.burst.apiRequestsPerHeal > 0);
  assert.ok(r.burst.again.wallMs > 0);
  assert.ok(r.burst.grpcJs.wallMs > 0 && r.burst.grpcJs.peakRssBytes > 0);
  assert.ok(r.burst.grpcJs.peakDriverCalls <= 32, `the grpc-js relay held its limit of 32: ${r.burst.grpcJs.peakDriverCalls}`);
  assert.equal(r.controllerQueue.nodes * r.controllerQueue.volumesPerNode, 5000);
  assert.ok(r.controllerQueue.wallMs > 0 && r.controllerQueue.maxStallMs >= 0);
  assert.ok(r.controllerScale.hwmBytes >= r.controllerScale.rssBytes && r.controllerScale.heapUsedBytes > 0 && r.controllerScale.syncMs > 0);
  assert.ok(r.burst.again.apiRequestsPerHeal < r.burst.apiRequestsPerHeal, "the second burst finds its PVs in the sidecar's cache");
  assert.ok(r.memory.peakRssBytes >= r.memory.idleRssBytes && r.memory.idleRssBytes > 0);
  assert.ok(r.startup.burstSidecar.processStartToServingMs >= r.startup.burstSidecar.driverReadyToServingMs);
  assert.equal(r.startup.repeated.all.length, 2);
  assert.ok(r.startup.repeated.all.every((st) => st.processStartToServingMs >= st.processStartToFirstLogMs && st.processStartToFirstLogMs > 0));
  const sorted = r.startup.repeated.all.map((st) => st.processStartToServingMs).sort((a, b) => a - b);
  assert.equal(r.startup.repeated.median.processStartToServingMs, sorted[0], "of two starts, the lower median");
  for (const c of [r.restartHeal.oneNode, r.restartHeal.fleet]) {
    assert.equal(c.healer.driverHealCalls, c.volumes, "one NodeHealVolume per volume after the restart: healed once, none lost");
    assert.ok(c.healer.peakDriverCalls <= c.perNodeConcurrency, `--per-node-concurrency held: ${c.healer.peakDriverCalls}`);
    // Heals reach a driver only once it is back; with staggered restarts the first heal can come
    // before the last driver is back, so the heal phase is bounded by the first driver back.
    assert.ok(c.floor.wallMs > 0 && c.healer.firstBackToLastHealedMs >= c.healer.healPhaseMs, JSON.stringify(c.healer));
    assert.ok(c.bareFloor.wallMs > 0 && c.grpcJsFloor.wallMs > 0);
    assert.ok(c.apiRequests.sidecarsPerHeal > 0, "the sidecars' requests are counted under their own identity");
    assert.ok(Object.keys(c.apiRequests.controller).length > 0, "the controller's requests are counted under its own identity");
    assert.ok(c.healer.cpuMsPerHeal.sidecars > 0 && c.floor.cpuMsPerHeal.drivers > 0, "CPU time is read from /proc");
  }
  assert.deepEqual([r.restartHeal.oneNode.runs?.length, r.restartHeal.fleet.runs?.length], [2, 2], "--restart-runs 2: both runs of each case kept");
  assert.equal(r.restartHeal.oneNode.fleet.nodes, 1);
  // The cluster: every volume healed exactly once with ALWAYS after its node's pod was replaced,
  // nothing re-listed, and the real sidecar's figures read at both sizes.
  const cl = r.cluster.rollout;
  assert.deepEqual([cl.heals.always, cl.heals.volumes, cl.heals.repeated], [200, 200, 0], JSON.stringify(cl.heals));
  assert.ok(cl.perNode.maxMs > 0 && cl.perNode.realMaxMs > 0 && cl.controller.peakRssBytes > 0, JSON.stringify(cl.perNode));
  assert.ok(Object.keys(cl.api.byIdentity).length === 3, "controller, simulated and real sidecars counted apart");
  assert.ok(r.cluster.sidecar.small.checks > 0 && r.cluster.sidecar.large.pvs > r.cluster.sidecar.small.pvs);
  assert.equal(r.cluster.sidecar.runs.length, 6, "three rounds of both sizes");
  // A just-started real sidecar's heal burst: each PV through its watch, each attachment read, no
  // list of PVs. Not exactly one each: the span also holds the other real sidecar's requests and any
  // heal the controller sent again after a deadline, which a busy machine adds (one watch and one
  // read per volume is asserted where nothing else runs: test/integration/sidecar/pv-cache.test.ts).
  const burst = cl.api.realSidecarBurst.requests;
  assert.ok((burst["watch persistentvolumes"] ?? 0) >= 20 && (burst["get volumeattachments"] ?? 0) >= 20, JSON.stringify(burst));
  assert.equal(burst["list persistentvolumes"], undefined, JSON.stringify(burst));
  assert.ok(cl.api.realSidecarBurst.healPathPerVolume >= 2 && cl.api.realSidecarBurst.readsPerVolume >= cl.api.realSidecarBurst.healPathPerVolume);
  assert.ok(r.restartHeal.fleet.fleet.nodes > 1);

  // Overload under deploy/'s memory settings, and as the image starts the sidecar without
  // NODE_OPTIONS: every call answered, alive, below deploy/'s limit.
  assert.equal(r.overloadImage.nodeOptions, "");
  for (const o of [r.overload, r.overloadImage]) {
    assert.ok(o.calls >= o.callers, `every caller answered at least once: ${o.calls}`);
    assert.deepEqual(Object.keys(o.outcomes).filter((k) => !["HEALED", "NOT_NEEDED", "RESOURCE_EXHAUSTED"].includes(k)), []);
    assert.ok(o.survived);
    assert.ok(Math.max(o.hwmBytes, o.peakRssBytes) < o.limitBytes && o.limitBytes > 0);
  }
  assert.equal(typeof r.apiRequestsPerRepeatedCheck, "number");
  assert.ok(r.soak.sent > 0 && r.soak.answered === r.soak.sent, `soak: every call answered (${r.soak.answered} of ${r.soak.sent})`);
  assert.ok(r.soak.driverRestarts >= 1 && r.reconnectMs !== null, "the soak restarted the driver and timed the reconnect");

  // Every process it started (it names their pids) is gone.
  const pids = pidsIn(bench.stderr());
  // Sections 1-4: API, driver-stub, three sidecars, the two relays and the burst's grpc-js relay. Headline, per node: driver-stub, restarted
  // driver-stub, sidecar, the two relays; per case: API and controller (--quick: 1 node, then 3), each case run twice.
  assert.ok(pids.length >= 8 + 2 * ((2 + 5 * 1) + (2 + 5 * 3)), `Kubernetes APIs, driver-stubs, sidecars and controllers: ${pids.join(", ")}`);
  await waitFor("every process the bench started to be gone", () => pids.every((p) => !alive(p)), { timeoutMs: 10_000 });
  assert.doesNotMatch(bench.stderr(), /kept /, "a good run keeps no working directory");
});

test("bench refuses a --restart-runs that is not a whole number of at least 1, before starting anything", async () => {
  for (const bad of ["0", "1.5", "x"]) {
    const bench = startTs("test/bench/bench.ts", ["--quick", "--restart-runs", bad]);
    assert.equal(await bench.exited, 2, bad);
    assert.match(bench.stderr(), /^bench: --restart-runs must be a whole number of at least 1$/m, bad);
    assert.doesNotMatch(bench.stderr(), /working directory/, "nothing started");
  }
});

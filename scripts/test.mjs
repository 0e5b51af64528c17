// Runs the tests with node's test runner through tsx, in two tiers (docs/testing.md):
//   unit         test/unit/** and the in-memory API's own tests in test/kube/: in process, fast;
//   integration  test/integration/**: real processes (the programs as they ship, bundled) on real sockets.
// `npm test` runs both, unit first; `npm run test:unit` / `npm run test:integration` one of them.
// Arguments filter test files by path substring: `npm test -- driver-stub`; those starting with
// "--" go to node's test runner: `npm test -- relay --test-name-pattern="deadline"`.
// Before an integration test starts, whatever it starts is built once if older than its sources
// (scripts/build-fresh.mjs). `npm test` puts node_modules/.bin first on PATH, so process.execPath is
// the pinned Node 24 runtime (the optional dependency node-linux-<arch>), whatever Node the machine has.
// TEST_CONCURRENCY=<n> overrides the unit tier's groups and the integration tier's files at once.
// TEST_TIME_SCALE=<x> lengthens every deadline a test waits with (test/support/wait.ts) and the
// runner's per-test timeouts below, for a machine slower than this suite's; it changes no assertion.
// --stress[=n] (`npm run test:stress`): n CPU-bound processes (default: one per core) run beside
// the whole suite, as a shared CI runner's neighbours would; the suite must pass as it does alone.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { buildStale } from "./build-fresh.mjs";

const root = new URL("..", import.meta.url).pathname;
const args = process.argv.slice(2);
const tierArg = args.find((a) => a.startsWith("--tier="))?.slice("--tier=".length);
const isStress = (a) => a === "--stress" || a.startsWith("--stress=");
// The last one counts: `npm run test:stress -- --stress=4` passes "--stress" first.
const stressArg = args.filter(isStress).at(-1);
const filters = args.filter((a) => !a.startsWith("--"));
const runnerOptions = args.filter((a) => a.startsWith("--") && !a.startsWith("--tier=") && !isStress(a));

const cores = availableParallelism();
/**
 * Unit: groups of files besides the files that run alone (groupsOf). Integration: files at once;
 * they mostly wait on the processes they start and on sockets, so twice the cores keeps the cores
 * busy (measured on 2 cores: docs/testing.md).
 */
const CONCURRENCY = { unit: cores, integration: cores * 2 };

// A file outside test/unit and test/integration (the in-memory API's tests in test/kube/) is
// integration when it starts a process.
const STARTS_PROCESSES =
  /\b(startProgram|startTs|startJs|startSidecarProc|startControllerProc|startDriverStub|startStack|upstreamFixture|withStub)\(|node:child_process/;
function tierOf(file) {
  if (file.startsWith("test/unit/")) return "unit";
  if (file.startsWith("test/integration/")) return "integration";
  return STARTS_PROCESSES.test(readFileSync(join(root, file), "utf8")) ? "integration" : "unit";
}

const timeScale = Number(process.env["TEST_TIME_SCALE"] || 1);
if (!(timeScale > 0)) {
  console.error(`TEST_TIME_SCALE=${process.env["TEST_TIME_SCALE"]}: a positive number, e.g. 2`);
  process.exit(2);
}
/**
 * The runner's per-test timeout: a test that hangs fails at it, named, instead of holding the run.
 * A unit test takes seconds (under 8 s with both cores busy); an integration test starts processes
 * and may wait out real backoffs. A test that needs longer says so with its own { timeout }.
 */
const TEST_TIMEOUT_MS = { unit: 60_000 * timeScale, integration: 180_000 * timeScale };

/** A unit test file whose tests wait on real timers for long says so; it gets a process of its own. */
const OWN_PROCESS = /^\/\/ unit tier: own process\b/m;

/**
 * The unit tier's files in processes that each import their share into one process
 * (--test-isolation=none): a process per file spends most of the tier starting tsx and compiling
 * the same modules again. The files marked OWN_PROCESS run alone; the others in `n` groups
 * balanced by size, the best guess of a file's time before running it.
 */
function groupsOf(files, n) {
  const alone = files.filter((f) => OWN_PROCESS.test(readFileSync(join(root, f), "utf8")));
  const rest = files.filter((f) => !alone.includes(f));
  const groups = Array.from({ length: Math.min(n, rest.length) }, () => ({ files: [], size: 0 }));
  const bySize = rest.map((f) => ({ f, size: statSync(join(root, f)).size })).sort((a, b) => b.size - a.size);
  for (const { f, size } of bySize) {
    const g = groups.reduce((a, b) => (b.size < a.size ? b : a));
    g.files.push(f);
    g.size += size;
  }
  return [...alone.map((f) => [f]), ...groups.map((g) => g.files.sort())];
}

/** One `node --test` process; its output is printed when it ends (live when `live`), its counts parsed. */
function runTests(tier, nodeArgs, files, live) {
  return new Promise((resolve) => {
    const timeout = `--test-timeout=${Math.round(TEST_TIMEOUT_MS[tier])}`;
    // --test-force-exit: a file whose tests are over ends, though a failed start left a server or a
    // process running (test/support/proc.ts kills and names those); it never waits for the timeout.
    const child = spawn(process.execPath, ["--import", "tsx", "--test", "--test-force-exit", timeout, ...nodeArgs, ...runnerOptions, ...files], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    const take = (stream, sink) =>
      stream.setEncoding("utf8").on("data", (d) => {
        out += d;
        if (live) sink.write(d);
      });
    take(child.stdout, process.stdout);
    take(child.stderr, process.stderr);
    const started = Date.now();
    child.once("close", (code) => {
      if (!live) process.stdout.write(`${out}\n(${files.length} files in ${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
      const count = (what) => Number(new RegExp(`^ℹ ${what} (\\d+)$`, "m").exec(out)?.[1] ?? 0);
      const failing = out.indexOf("✖ failing tests:");
      resolve({
        ok: code === 0,
        pass: count("pass"),
        fail: count("fail") + count("cancelled"),
        skipped: count("skipped"),
        failing: failing === -1 ? (code === 0 ? "" : out.slice(-4000)) : out.slice(failing),
      });
    });
  });
}

const files = readdirSync(join(root, "test"), { recursive: true })
  .filter((f) => f.endsWith(".test.ts"))
  .map((f) => join("test", f))
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
if (tierArg !== undefined && !["unit", "integration"].includes(tierArg)) {
  console.error(`--tier=${tierArg}: unit or integration`);
  process.exit(2);
}
const tiers = ["unit", "integration"]
  .filter((t) => tierArg === undefined || tierArg === t)
  .map((tier) => ({ tier, files: files.filter((f) => tierOf(f) === tier) }))
  .filter((t) => t.files.length > 0);
if (tiers.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}

console.log(`tests run on Node ${process.version} (${process.execPath}), ${cores} cores${timeScale === 1 ? "" : `, TEST_TIME_SCALE=${timeScale}`}`);
const busy = stressArg === undefined ? [] : startBusyLoops(stressArg === "--stress" ? cores : Number(stressArg.slice("--stress=".length)));
if (tiers.some((t) => t.tier === "integration")) console.log(`programs: ${buildStale((line) => console.log(line))}`);
const took = [];
const failures = [];
const total = { ok: true, pass: 0, fail: 0, skipped: 0 };
for (const { tier, files: tierFiles } of tiers) {
  const concurrency = Number(process.env["TEST_CONCURRENCY"] ?? CONCURRENCY[tier]);
  const started = Date.now();
  let results;
  if (tier === "unit") {
    const groups = groupsOf(tierFiles, concurrency);
    console.log(`\nunit: ${tierFiles.length} files in ${groups.length} processes`);
    results = await Promise.all(groups.map((g) => runTests(tier, ["--test-isolation=none"], g, false)));
  } else {
    console.log(`\nintegration: ${tierFiles.length} files, ${concurrency} at once`);
    results = [await runTests(tier, [`--test-concurrency=${concurrency}`], tierFiles, true)];
  }
  const ok = results.every((r) => r.ok);
  for (const r of results) for (const k of ["pass", "fail", "skipped"]) total[k] += r[k];
  for (const r of results) if (r.failing) failures.push(`${tier}: ${r.failing.trim()}`);
  total.ok &&= ok;
  took.push(`${tier} ${((Date.now() - started) / 1000).toFixed(1)} s${ok ? "" : " (failed)"}`);
}
for (const b of busy) b.kill("SIGKILL");
// Again at the end, where a log cut to its tail (a CI summary) still shows which test failed and why.
if (failures.length > 0) console.log(`\n${failures.join("\n\n")}`);
console.log(`\n${took.join(", ")}`);
console.log(`tests: ${total.pass} passed, ${total.fail} failed${total.skipped ? `, ${total.skipped} skipped` : ""}`);
process.exit(total.ok ? 0 : 1);

/**
 * `n` processes that each keep a core busy for as long as this runner lives: the load a shared CI
 * runner's neighbours put beside the suite. Killed when the tests end, and with this process.
 */
function startBusyLoops(n) {
  if (!Number.isInteger(n) || n < 1) {
    console.error(`--stress=${n}: a whole number of busy processes, at least 1`);
    process.exit(2);
  }
  const loops = Array.from({ length: n }, () => spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
  const killAll = () => loops.forEach((l) => l.kill("SIGKILL"));
  process.once("exit", killAll);
  for (const sig of ["SIGINT", "SIGTERM"]) process.once(sig, () => (killAll(), process.exit(130)));
  console.log(`stress: ${n} CPU-bound processes beside the suite (pids ${loops.map((l) => l.pid).join(", ")})`);
  return loops;
}

// Runs the tests with node's test runner through tsx, in two tiers (docs/testing.md):
//   unit         test/unit/** and the in-memory API's own tests in test/kube/: in process, fast;
//   integration  test/integration/**: real processes (the programs as they ship, bundled) on real sockets.
// `npm test` runs both, unit first; `npm run test:unit` / `npm run test:integration` one of them.
// Arguments filter test files by path substring: `npm test -- driver-stub`; those starting with
// "--" go to node's test runner: `npm test -- relay --test-name-pattern="deadline"`.
// Before an integration test starts, whatever it starts is built once if older than its sources
// (scripts/build-fresh.mjs). `npm test` puts node_modules/.bin first on PATH, so process.execPath is
// the pinned Node 24 runtime (the optional dependency node-linux-<arch>), whatever Node the machine has.
// TEST_CONCURRENCY=<n> overrides how many test files run at once in each tier.
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { buildStale } from "./build-fresh.mjs";

const root = new URL("..", import.meta.url).pathname;
const args = process.argv.slice(2);
const tierArg = args.find((a) => a.startsWith("--tier="))?.slice("--tier=".length);
const filters = args.filter((a) => !a.startsWith("--"));
const runnerOptions = args.filter((a) => a.startsWith("--") && !a.startsWith("--tier="));

const cores = availableParallelism();
/**
 * Files at once: unit tests keep the cores busy; integration tests mostly wait on the processes
 * they start and on sockets, so twice the cores keeps them busy too (measured on 2 cores:
 * docs/testing.md).
 */
const CONCURRENCY = { unit: cores, integration: cores * 2 };

// A file outside test/unit and test/integration (the in-memory API's tests in test/kube/) is
// integration when it starts a process.
const STARTS_PROCESSES = /\b(startProgram|startTs|startJs|startSidecarProc|startControllerProc|startDriverStub|startStack|upstreamFixture|withStub)\(|node:child_process/;
function tierOf(file) {
  if (file.startsWith("test/unit/")) return "unit";
  if (file.startsWith("test/integration/")) return "integration";
  return STARTS_PROCESSES.test(readFileSync(join(root, file), "utf8")) ? "integration" : "unit";
}

const files = readdirSync(join(root, "test"), { recursive: true })
  .filter((f) => f.endsWith(".test.ts"))
  .map((f) => join("test", f))
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
const tiers = ["unit", "integration"]
  .filter((t) => tierArg === undefined || tierArg === t)
  .map((tier) => ({ tier, files: files.filter((f) => tierOf(f) === tier) }))
  .filter((t) => t.files.length > 0);
if (tierArg !== undefined && !["unit", "integration"].includes(tierArg)) {
  console.error(`--tier=${tierArg}: unit or integration`);
  process.exit(2);
}
if (tiers.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}

console.log(`tests run on Node ${process.version} (${process.execPath}), ${cores} cores`);
if (tiers.some((t) => t.tier === "integration")) console.log(`programs: ${buildStale((line) => console.log(line))}`);
let failed = false;
const took = [];
for (const { tier, files: tierFiles } of tiers) {
  const concurrency = Number(process.env["TEST_CONCURRENCY"] ?? CONCURRENCY[tier]);
  console.log(`\n${tier}: ${tierFiles.length} files, ${concurrency} at once`);
  const started = Date.now();
  const r = spawnSync(
    process.execPath,
    ["--import", "tsx", "--test", `--test-concurrency=${concurrency}`, "--test-timeout=180000", ...runnerOptions, ...tierFiles],
    { cwd: root, stdio: "inherit" },
  );
  took.push(`${tier} ${((Date.now() - started) / 1000).toFixed(1)} s${r.status === 0 ? "" : " (failed)"}`);
  if (r.status !== 0) failed = true;
}
console.log(`\n${took.join(", ")}`);
process.exit(failed ? 1 : 0);

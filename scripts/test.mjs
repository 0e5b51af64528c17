// Runs every test/**/*.test.ts with node's test runner through tsx (Node 20's --test takes no globs).
// `npm test` puts node_modules/.bin first on PATH, so process.execPath is the pinned Node 24 runtime
// (the optional dependency node-linux-<arch>), whatever Node the machine itself has.
// Extra arguments filter test files by substring: `npm test -- driver-stub`; those starting with
// "--" go to node's test runner: `npm test -- relay --test-name-pattern="deadline"`.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const args = process.argv.slice(2);
const filters = args.filter((a) => !a.startsWith("--"));
const runnerOptions = args.filter((a) => a.startsWith("--"));
const files = readdirSync(join(root, "test"), { recursive: true })
  .filter((f) => f.endsWith(".test.ts"))
  .map((f) => join("test", f))
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
if (files.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}
console.log(`tests run on Node ${process.version} (${process.execPath})`);
const r = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", "--test-concurrency=2", "--test-timeout=180000", ...runnerOptions, ...files],
  { cwd: root, stdio: "inherit" },
);
process.exit(r.status ?? 1);

// Order independence: runs every matching test file alone, then every test in it alone by name
// (--test-name-pattern), and lists what fails only in isolation. Slow; not part of `npm test`.
// Usage: npm run test-each -- [file substring ...]   e.g. `npm run test-each -- sidecar/` (through npm,
// so the tests run on the pinned Node, as `npm test` does).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { buildStale } from "./build-fresh.mjs";
import { escapeRegExp } from "./mutate.mjs";

const root = new URL("..", import.meta.url).pathname;
const reporter = join(root, "scripts/test-each-reporter.mjs");
const filters = process.argv.slice(2);
const files = readdirSync(join(root, "test"), { recursive: true })
  .filter((f) => f.endsWith(".test.ts"))
  .map((f) => join("test", f))
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();

// The integration tests start the programs as built: build what is stale once, first.
console.log(`programs: ${buildStale((line) => console.log(line))}`);

/** Runs one file (optionally one test by name); returns the reporter's records. */
function run(file, pattern) {
  const args = ["--import", "tsx", "--test", "--test-concurrency=1", "--test-timeout=600000", `--test-reporter=${reporter}`];
  if (pattern !== undefined) args.push(`--test-name-pattern=${pattern}`);
  const r = spawnSync(process.execPath, [...args, file], { cwd: root, encoding: "utf8", maxBuffer: 64 << 20 });
  const records = r.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l));
  return { status: r.status, records };
}

const failures = [];
for (const file of files) {
  const whole = run(file);
  const leaves = whole.records.filter((r) => !r.suite);
  if (whole.status !== 0)
    failures.push(
      `${file}: fails when run alone (${leaves
        .filter((r) => !r.ok)
        .map((r) => r.name)
        .join("; ")})`,
    );
  console.log(`${file}: alone ${whole.status === 0 ? "ok" : "FAILED"}, ${leaves.length} tests`);
  for (const name of new Set(leaves.map((r) => r.name))) {
    const one = run(file, `^${escapeRegExp(name)}$`);
    const ran = one.records.filter((r) => !r.suite && !r.skip && r.name === name);
    const ok = one.status === 0 && ran.length > 0 && ran.every((r) => r.ok);
    if (!ok) failures.push(`${file}: "${name}" ${ran.length === 0 ? "did not run or was skipped" : "fails"} when run by name`);
    console.log(`  ${ok ? "ok  " : "FAIL"} ${name}`);
  }
}
console.log(failures.length === 0 ? "\nevery file and every test passed alone" : `\n${failures.length} failure(s):\n${failures.join("\n")}`);
process.exit(failures.length === 0 ? 0 : 1);

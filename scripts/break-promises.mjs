// Each promise the README and the design make, broken by hand: scripts/promise-breaks.json holds
// one edit per promise (the line that keeps it, replaced) and the test that must notice. Each break
// is applied alone to a private copy of the repository (the working tree is never touched), and
// the named test is run; the break is "caught" when that test fails or times out. A break whose
// text is no longer in its file is reported as stale: update the list when the code moves.
// Not part of `npm test` or CI (a few minutes).
//
//   npm run break-promises                 every break
//   npm run break-promises -- deadline     only breaks whose promise contains "deadline"
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { escapeRegExp, makeCopy, runTestFile } from "./mutate.mjs";

const root = new URL("..", import.meta.url).pathname;
const { breaks } = JSON.parse(readFileSync(join(root, "scripts/promise-breaks.json"), "utf8"));
const filters = process.argv.slice(2);
const chosen = breaks.filter((b) => filters.length === 0 || filters.some((f) => b.promise.includes(f)));
const TIMEOUT_MS = 180_000;

const copy = makeCopy();
process.once("SIGINT", () => (rmSync(copy, { recursive: true, force: true }), process.exit(130)));
let missed = 0;
try {
  for (const [i, b] of chosen.entries()) {
    const file = join(copy, b.file);
    const original = readFileSync(file, "utf8");
    const found = original.split(b.from).length - 1;
    const label = `[${i + 1}/${chosen.length}] ${b.promise}`;
    if (found !== 1) {
      missed++;
      console.log(`${label}: STALE (the text to break is found ${found} times in ${b.file})`);
      continue;
    }
    let r;
    try {
      writeFileSync(
        file,
        original.replace(b.from, () => b.to),
      );
      r = await runTestFile(copy, b.test, TIMEOUT_MS, escapeRegExp(b.name));
    } finally {
      writeFileSync(file, original);
    }
    if (r.outcome === "pass" && r.tests === 0) {
      missed++;
      console.log(`${label}: STALE (no test in ${b.test} matches "${b.name}")`);
      continue;
    }
    const caught = r.outcome !== "pass";
    if (!caught) missed++;
    // TAP lists a failed test before the suites around it.
    const by = r.failed[0] ? `: ${r.failed[0]}` : "";
    console.log(
      `${label}: ${caught ? `caught (${r.outcome} in ${(r.ms / 1000).toFixed(0)} s${by})` : "NOT CAUGHT"}\n    ${b.file}: ${JSON.stringify(b.from)} -> ${JSON.stringify(b.to)}`,
    );
  }
} finally {
  rmSync(copy, { recursive: true, force: true });
}
console.log(`${chosen.length - missed} of ${chosen.length} breaks caught by their tests`);
process.exitCode = missed === 0 ? 0 : 1;

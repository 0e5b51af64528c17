// The README's flag tables name every flag the programs' parsers take, with the default each
// parser declares, so a flag added or a default changed without its line for users fails here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { FLAGS as SIDECAR_FLAGS, helpText as sidecarHelp } from "../../../sidecar/config/config.js";
import { FLAGS as CONTROLLER_FLAGS, HEAL_FLAGS, helpText as controllerHelp } from "../../../controller/config/config.js";
import { repoRoot } from "../../support/proc.js";

const readme = readFileSync(join(repoRoot, "README.md"), "utf8");

/** Flag names from a program's --help text (`  --name value (env X)`). */
function flagsOf(help: string): string[] {
  return [...help.matchAll(/^ {2}--([A-Za-z0-9_-]+)/gm)].map((m) => m[1]!);
}

for (const [program, help] of [
  ["sidecar", sidecarHelp()],
  ["controller", controllerHelp()],
] as const) {
  test(`README names every flag of the ${program}`, () => {
    const flags = flagsOf(help);
    assert.ok(flags.length > 20, `read ${flags.length} flags from the ${program}'s help`);
    const missing = flags.filter((f) => f !== "help" && f !== "version" && !readme.includes(`\`${f.length === 1 ? "-" : "--"}${f}\``));
    assert.deepEqual(missing, [], `flags of the ${program} missing from README.md`);
  });
}

/** The lines of the README section under `heading` (to the next heading of that level or above). */
function section(heading: string): string[] {
  const lines = readme.split("\n");
  const start = lines.indexOf(heading);
  assert.ok(start >= 0, `README has no "${heading}"`);
  const level = heading.indexOf(" ");
  const end = lines.findIndex((l, i) => i > start && /^#+ /.test(l) && l.indexOf(" ") <= level);
  return lines.slice(start, end < 0 ? undefined : end);
}

for (const [program, heading, flags] of [
  ["sidecar", "### Sidecar", SIDECAR_FLAGS],
  ["controller", "### Controller", [...CONTROLLER_FLAGS, ...HEAL_FLAGS]],
] as const) {
  test(`README's flag tables give the ${program}'s declared defaults`, () => {
    const rows = section(heading);
    const wrong = flags
      .filter((f) => f.default !== undefined && f.default !== "" && f.kind !== "bool")
      .filter((f) => {
        const row = rows.find((l) => l.startsWith(`| \`--${f.name}\``));
        return row !== undefined && !row.includes(`\`${f.default}\``);
      })
      .map((f) => `--${f.name}: ${f.default}`);
    assert.deepEqual(wrong, [], `README rows whose default differs from the parser's`);
  });
}

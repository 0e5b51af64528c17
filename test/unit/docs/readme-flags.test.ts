// The README's flag tables name every flag the programs' parsers take, so a flag added to a parser
// without a line for users fails here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { helpText as sidecarHelp } from "../../../sidecar/config/config.js";
import { helpText as controllerHelp } from "../../../controller/config/config.js";
import { repoRoot } from "../../support/proc.js";

const readme = readFileSync(join(repoRoot, "README.md"), "utf8");

/** Flag names from a program's --help text (`  --name value (env X)`). */
function flagsOf(help: string): string[] {
  return [...help.matchAll(/^ {2}--([A-Za-z0-9_-]+)/gm)].map((m) => m[1]!);
}

for (const [program, help] of [["sidecar", sidecarHelp()], ["controller", controllerHelp()]] as const) {
  test(`README names every flag of the ${program}`, () => {
    const flags = flagsOf(help);
    assert.ok(flags.length > 20, `read ${flags.length} flags from the ${program}'s help`);
    const missing = flags.filter((f) => f !== "help" && f !== "version" && !readme.includes(`\`${f.length === 1 ? "-" : "--"}${f}\``));
    assert.deepEqual(missing, [], `flags of the ${program} missing from README.md`);
  });
}

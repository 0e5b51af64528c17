// Regenerates proto/gen from proto/*.proto with buf + ts-proto (both pinned in package.json).
// `--check` regenerates into a temporary folder and fails when the committed code is stale.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, cpSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const target = join(root, "proto/gen");
const check = process.argv.includes("--check");

const tmp = mkdtempSync(join(tmpdir(), "gen-"));
try {
  execFileSync(join(root, "node_modules/.bin/buf"), ["generate", "--output", tmp], { cwd: root, stdio: "inherit" });
  const fresh = join(tmp, "proto/gen");
  if (check) {
    const diff = compare(fresh, target);
    if (diff.length) {
      console.error(`proto/gen is stale; run \`npm run gen\` and commit. Differing files:\n  ${diff.join("\n  ")}`);
      process.exitCode = 1;
    } else {
      console.log("proto/gen is up to date");
    }
  } else {
    rmSync(target, { recursive: true, force: true });
    cpSync(fresh, target, { recursive: true });
    console.log(`generated ${files(target).length} files into proto/gen`);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

function files(dir) {
  return readdirSync(dir, { recursive: true })
    .map((f) => join(dir, f))
    .filter((f) => statSync(f).isFile());
}

function compare(a, b) {
  const rel = (dir) => new Set(files(dir).map((f) => relative(dir, f)));
  let inB;
  try {
    inB = rel(b);
  } catch {
    inB = new Set();
  }
  const inA = rel(a);
  const all = new Set([...inA, ...inB]);
  return [...all].filter((f) => !inA.has(f) || !inB.has(f) || !readFileSync(join(a, f)).equals(readFileSync(join(b, f))));
}

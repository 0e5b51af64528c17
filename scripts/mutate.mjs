// Mutation testing: generates operator mutants of a module's source (flipped conditions, swapped
// logical operators, removed negations, changed constants, dropped awaits, removed calls, ...),
// applies each one alone to a private copy of the repository and runs the module's test files
// (derived from the layout: see targetTests) with a timeout. A mutant is killed when a test file fails or times
// out, survived when all pass. Not part of `npm test` or CI: run it when changing a module.
//
//   npm run mutate -- --module relay --max 20        a seeded sample of 20 mutants, in minutes
//   npm run mutate -- --module relay,server,node     every mutant of three modules (long)
//   npm run mutate -- --module relay --list          list the mutants only
//   options: --seed N, --jobs N (parallel copies), --file <substring>, --only <id,...>, --out FILE,
//            --no-baseline (skip the unmutated run that sets the timeouts; 300 s each then)
//
// The working tree is never touched: mutants live in copies under the system's temp directory,
// and each copy's file is restored (in a finally) before the next mutant.
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

// ---- targets -------------------------------------------------------------------------------------

/** Where the programs' sources are: every folder under these with .ts files of its own is a target. */
const SOURCE_ROOTS = ["common", "sidecar", "controller", "driver-stub"];
/** Integration tests a folder's own name does not find (scripts/mutate-targets.json: folder → test files). */
const extraTests = JSON.parse(readFileSync(join(root, "scripts/mutate-targets.json"), "utf8"));

const listTests = (dir) =>
  existsSync(join(root, dir))
    ? readdirSync(join(root, dir), { recursive: true })
        .filter((f) => f.endsWith(".test.ts"))
        .map((f) => join(dir, f))
        .sort()
    : [];

/** The source folders whose modules are their own (not a folder of folders only). */
function sourceDirs() {
  const dirs = new Set();
  for (const top of SOURCE_ROOTS) {
    for (const f of readdirSync(join(root, top), { recursive: true })) {
      const dir = join(top, f, "..");
      if (f.endsWith(".ts") && (dir !== top || !SOURCE_ROOTS.includes(dir) || top === "driver-stub")) dirs.add(dir);
    }
  }
  return [...dirs].sort();
}

/** The source folders a test file imports a module of (type-only imports left out). */
function importedDirs(file) {
  const text = readFileSync(join(root, file), "utf8");
  const dirs = new Set();
  for (const m of text.matchAll(/^import (?!type )[^;]*? from "(\.[^"]+)";/gms)) dirs.add(join(file, "..", m[1], ".."));
  return dirs;
}

/**
 * A folder's test files, in process first: test/unit/<folder>/, every unit or integration test
 * that imports one of its modules, test/integration/<folder>/ (driver-stub), the integration tests
 * of its program named after it (sidecar/relay: test/integration/sidecar/relay*.test.ts), and
 * scripts/mutate-targets.json's extras.
 */
function targetTests(dir, imports) {
  const name = dir.split("/").at(-1);
  const program = dir.split("/")[0];
  const integration = listTests("test/integration").filter(
    (f) =>
      imports.get(f).has(dir) ||
      f.startsWith(`test/integration/${dir}/`) ||
      (f.startsWith(`test/integration/${program}/`) && f.split("/").at(-1).startsWith(name)),
  );
  const unit = [...listTests(join("test/unit", dir)), ...listTests("test/unit").filter((f) => imports.get(f).has(dir))];
  return [...new Set([...unit, ...integration, ...(extraTests[dir] ?? [])])];
}

/** Every target: its name (the folder, "/" as "-": sidecar-relay), folder and test files. */
function deriveTargets() {
  const imports = new Map([...listTests("test/unit"), ...listTests("test/integration")].map((f) => [f, importedDirs(f)]));
  return Object.fromEntries(sourceDirs().map((dir) => [dir.replaceAll("/", "-"), { dir, tests: targetTests(dir, imports) }]));
}
const targets = deriveTargets();

/** A target by its name, its folder, or the folder's last part when only one folder has it (relay). */
function targetName(given) {
  const wanted = given.replaceAll("/", "-");
  if (targets[wanted]) return wanted;
  const matches = Object.keys(targets).filter((k) => k.endsWith(`-${wanted}`));
  if (matches.length === 1) return matches[0];
  throw new Error(`unknown module ${given}${matches.length > 1 ? ` (which: ${matches.join(", ")}?)` : ""}; modules: ${Object.keys(targets).join(", ")}`);
}

// ---- options -----------------------------------------------------------------------------------

function parseOptions(argv) {
  const o = { modules: [], max: Infinity, seed: 1, jobs: 1, file: undefined, only: undefined, list: false, out: undefined, baseline: true };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s);
    const value = () => inline ?? argv[++i];
    if (flag === "--module") o.modules.push(...value().split(","));
    else if (flag === "--max") o.max = Number(value());
    else if (flag === "--seed") o.seed = Number(value());
    else if (flag === "--jobs") o.jobs = Number(value());
    else if (flag === "--file") o.file = value();
    else if (flag === "--only") o.only = new Set(value().split(","));
    else if (flag === "--out") o.out = value();
    else if (flag === "--list") o.list = true;
    else if (flag === "--no-baseline") o.baseline = false;
    else throw new Error(`unknown option ${flag}; see the header of scripts/mutate.mjs`);
  }
  o.modules = o.modules.length === 0 ? Object.keys(targets) : o.modules.map(targetName);
  return o;
}

// ---- mutants -----------------------------------------------------------------------------------

/** [regexp, replacement(match) or string, operator name]; applied to code outside strings and comments. */
const OPERATORS = [
  [/===/g, "!==", "equality"],
  [/!==/g, "===", "equality"],
  [/ <= /g, " > ", "relational"],
  [/ >= /g, " < ", "relational"],
  [/ < /g, " >= ", "relational"],
  [/ > /g, " <= ", "relational"],
  [/ && /g, " || ", "logical"],
  [/ \|\| /g, " && ", "logical"],
  [/(?<=[\s([,])!(?=[\w$(.])/g, "", "negation"],
  [/\btrue\b/g, "false", "boolean"],
  [/\bfalse\b/g, "true", "boolean"],
  [/(?<![\w$.])\d[\d_]*(?:\.\d+)?(?![\w$])/g, (m) => (Number(m.replace(/_/g, "")) === 0 ? "1" : "0"), "constant"],
  [/Math\.min\(/g, "Math.max(", "min-max"],
  [/Math\.max\(/g, "Math.min(", "min-max"],
  [/\bawait /g, "", "await"],
  [/ \+ /g, " - ", "arithmetic"],
  [/ - /g, " + ", "arithmetic"],
  [/ \* /g, " / ", "arithmetic"],
];

const STATEMENT_CALL = /^(\s*)(?:await\s+)?[\w$]+(?:(?:\?\.|!?\.)[\w$]+)*\(.*\);\s*$/;
const KEYWORDS = /^\s*(return|const|let|var|throw|if|for|while|switch|case|import|export|yield)\b/;

/** Character ranges of string literals and the trailing comment of one line (a simple scanner). */
function protectedRanges(line) {
  const ranges = [];
  let quote;
  let start = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === "\\") i++;
      else if (quote === "`" && c === "$" && line[i + 1] === "{") {
        // ${...} inside a template is code: end the protected range here, resume after the brace.
        ranges.push([start, i]);
        const close = line.indexOf("}", i);
        if (close < 0) return ranges;
        i = close;
        start = close;
      } else if (c === quote) {
        ranges.push([start, i + 1]);
        quote = undefined;
      }
    } else if (c === '"' || c === "'" || c === "`") {
      quote = c;
      start = i;
    } else if (c === "/" && line[i + 1] !== "/" && /(^|[=(,:!&|?{};]|return)\s*$/.test(line.slice(0, i))) {
      // A regular expression literal: up to the next unescaped "/" outside a character class.
      let j = i + 1;
      for (let inClass = false; j < line.length && (line[j] !== "/" || inClass); j++) {
        if (line[j] === "\\") j++;
        else if (line[j] === "[") inClass = true;
        else if (line[j] === "]") inClass = false;
      }
      ranges.push([i, j + 1]);
      i = j;
    } else if (c === "/" && line[i + 1] === "/") {
      ranges.push([i, line.length]);
      return ranges;
    }
  }
  if (quote) ranges.push([start, line.length]);
  return ranges;
}

function isCodeLine(line) {
  const t = line.trim();
  return t !== "" && !t.startsWith("//") && !t.startsWith("*") && !t.startsWith("/*") && !/^(import|export \{|export type|export \* )/.test(t);
}

function balanced(s) {
  let depth = 0;
  for (const c of s) {
    if (c === "(") depth++;
    if (c === ")" && --depth < 0) return false;
  }
  return depth === 0;
}

export function mutantsOf(file, text) {
  const lines = text.split("\n");
  const out = [];
  let inBlockComment = false;
  lines.forEach((line, i) => {
    if (inBlockComment) {
      if (line.includes("*/")) inBlockComment = false;
      return;
    }
    if (line.trim().startsWith("/*") && !line.includes("*/")) {
      inBlockComment = true;
      return;
    }
    if (!isCodeLine(line)) return;
    const guarded = protectedRanges(line);
    const inside = (a, b) => guarded.some(([s, e]) => a < e && b > s);
    for (const [re, rep, operator] of OPERATORS) {
      for (const m of line.matchAll(re)) {
        if (inside(m.index, m.index + m[0].length)) continue;
        // Type positions: `x: 0 | 1`, generics and arrows are not what the relational operators mean.
        if (operator === "constant" && /\[\s*$/.test(line.slice(0, m.index)) && /^\s*\]/.test(line.slice(m.index + m[0].length))) continue;
        const replacement = typeof rep === "function" ? rep(m[0]) : rep;
        const mutated = line.slice(0, m.index) + replacement + line.slice(m.index + m[0].length);
        out.push({
          id: `${file}:${i + 1}:${m.index + 1}:${operator}`,
          file,
          line: i + 1,
          operator,
          original: line.trim(),
          mutated: mutated.trim(),
          apply: (t) => replaceLine(t, i, mutated),
        });
      }
    }
    const call = STATEMENT_CALL.exec(line);
    if (call && !KEYWORDS.test(line) && balanced(line) && !inside(line.search(/\S/), line.search(/\S/) + 1)) {
      const mutated = `${call[1]}void 0;`;
      out.push({
        id: `${file}:${i + 1}:1:remove-call`,
        file,
        line: i + 1,
        operator: "remove-call",
        original: line.trim(),
        mutated: "void 0;",
        apply: (t) => replaceLine(t, i, mutated),
      });
    }
  });
  return out;
}

function replaceLine(text, index, line) {
  const lines = text.split("\n");
  lines[index] = line;
  return lines.join("\n");
}

function sourceFiles(dir) {
  return readdirSync(join(root, dir), { recursive: true })
    .map((f) => join(dir, f))
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts") && statSync(join(root, f)).isFile())
    .sort();
}

function testFiles(entries) {
  return entries.flatMap((e) => {
    const abs = join(root, e);
    if (!existsSync(abs)) return [];
    if (statSync(abs).isFile()) return [e];
    return readdirSync(abs, { recursive: true })
      .filter((f) => f.endsWith(".test.ts"))
      .map((f) => join(e, f))
      .sort();
  });
}

/** Deterministic sample of n, spread over the list (seeded Fisher-Yates), kept in source order. */
function sample(list, n, seed) {
  if (n >= list.length) return list;
  let s = seed >>> 0 || 1;
  const rand = () => (s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32;
  const idx = list.map((_, i) => i);
  for (let i = idx.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx
    .slice(0, n)
    .sort((a, b) => a - b)
    .map((i) => list[i]);
}

// ---- running -------------------------------------------------------------------------------------

/** `text` as a regular expression that matches it literally (a test name for --test-name-pattern). */
export const escapeRegExp = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A private copy of the repository (node_modules linked, not copied). */
export function makeCopy() {
  const dir = mkdtempSync(join(tmpdir(), "mutate-"));
  const skip = new Set(["node_modules", ".git", "dist", "bench", ".tmp"]);
  for (const entry of readdirSync(root)) {
    if (skip.has(entry)) continue;
    cpSync(join(root, entry), join(dir, entry), { recursive: true });
  }
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"));
  return dir;
}

/**
 * Runs one test file in `cwd` (only the tests matching `namePattern`, if given); resolves with
 * "pass", "fail" or "timeout", the time taken and the failed tests.
 */
export function runTestFile(cwd, file, timeoutMs, namePattern) {
  return new Promise((resolve) => {
    const started = Date.now();
    const only = namePattern === undefined ? [] : [`--test-name-pattern=${namePattern}`];
    // The run's own temporary directory, removed after it: a test file killed at its timeout
    // cannot remove its sockets, state files and logs itself (hundreds piled up in /tmp per run).
    const tmp = mkdtempSync(join(tmpdir(), "mutate-run-"));
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "--test", "--test-concurrency=1", `--test-timeout=${timeoutMs}`, "--test-reporter=tap", ...only, file],
      {
        cwd,
        // The programs from their sources: the copy's mutated source is not built again.
        env: { ...process.env, TMPDIR: tmp, TEST_PROGRAMS: "source" },
        detached: true, // its own process group: a timeout kills the sidecars and stubs it started too
        stdio: ["ignore", "pipe", "ignore"],
      },
    );
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (out += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }, timeoutMs);
    child.once("exit", (code) => {
      clearTimeout(timer);
      // Whatever the tests left running goes with the group.
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // nothing left in the group
      }
      rmSync(tmp, { recursive: true, force: true });
      const failed = [...out.matchAll(/^\s*not ok \d+ - (.*)$/gm)].map((m) => m[1]);
      const tests = Number(/^# tests (\d+)$/m.exec(out)?.[1] ?? 0);
      resolve({ outcome: timedOut ? "timeout" : code === 0 ? "pass" : "fail", ms: Date.now() - started, failed, tests });
    });
  });
}

async function main() {
  const o = parseOptions(process.argv.slice(2));
  const report = { startedAt: new Date().toISOString(), seed: o.seed, modules: {} };
  const copies = [];
  const cleanup = () => {
    for (const c of copies.splice(0)) rmSync(c, { recursive: true, force: true });
  };
  process.once("SIGINT", () => (cleanup(), process.exit(130)));
  process.once("SIGTERM", () => (cleanup(), process.exit(143)));
  try {
    for (const name of o.modules) {
      const t = targets[name];
      if (!existsSync(join(root, t.dir))) {
        console.log(`${name}: ${t.dir} does not exist yet; skipped`);
        continue;
      }
      const tests = testFiles(t.tests);
      const all = sourceFiles(t.dir).flatMap((f) => mutantsOf(f, readFileSync(join(root, f), "utf8")));
      const filtered = all.filter((m) => (!o.file || m.file.includes(o.file)) && (!o.only || o.only.has(m.id)));
      const chosen = sample(filtered, o.max, o.seed);
      console.log(`${name}: ${all.length} mutants in ${t.dir}, running ${chosen.length}; tests: ${tests.join(" ")}`);
      if (o.list) {
        for (const m of chosen) console.log(`  ${m.id}\n    - ${m.original}\n    + ${m.mutated}`);
        continue;
      }
      if (tests.length === 0) {
        console.log(`${name}: no test files; skipped`);
        continue;
      }
      while (copies.length < o.jobs) copies.push(makeCopy());
      // Baseline: the unmutated tests must pass here; their times set the timeouts.
      const limits = {};
      for (const f of tests) {
        if (!o.baseline) {
          limits[f] = 300_000;
          continue;
        }
        const r = await runTestFile(copies[0], f, 600_000);
        if (r.outcome !== "pass") throw new Error(`baseline: ${f} does not pass without mutations (${r.outcome}); fix that first`);
        limits[f] = Math.max(30_000, r.ms * 3);
      }
      const results = [];
      let next = 0;
      const worker = async (copy) => {
        while (next < chosen.length) {
          const m = chosen[next++];
          const file = join(copy, m.file);
          const original = readFileSync(file, "utf8");
          let verdict = { status: "survived", by: undefined };
          try {
            writeFileSync(file, m.apply(original));
            for (const f of tests) {
              let r = await runTestFile(copy, f, limits[f]);
              // On a busy machine a timing-sensitive test may fail by chance: a kill must repeat.
              if (r.outcome !== "pass") r = { ...(await runTestFile(copy, f, limits[f])), first: r };
              if (r.outcome !== "pass") {
                verdict = { status: r.outcome === "timeout" ? "timeout" : "killed", by: f, tests: r.failed };
                break;
              }
              if (r.first) console.log(`  (a failure of ${f} did not repeat: ${r.first.outcome} ${r.first.failed.join("; ")})`);
            }
          } finally {
            writeFileSync(file, original);
          }
          results.push({ id: m.id, operator: m.operator, original: m.original, mutated: m.mutated, ...verdict });
          const tag = verdict.status === "survived" ? "SURVIVED" : `${verdict.status} by ${relative("test", verdict.by)}`;
          const which = verdict.tests?.length ? `\n      failed: ${verdict.tests.join("; ")}` : "";
          console.log(`  [${results.length}/${chosen.length}] ${tag.padEnd(40)} ${m.id}\n      - ${m.original}\n      + ${m.mutated}${which}`);
        }
      };
      await Promise.all(copies.slice(0, o.jobs).map(worker));
      results.sort((a, b) => a.id.localeCompare(b.id, undefined, { numeric: true }));
      const killed = results.filter((r) => r.status !== "survived").length;
      const score = results.length ? (100 * killed) / results.length : 0;
      report.modules[name] = {
        dir: t.dir,
        generated: all.length,
        run: results.length,
        killed,
        survived: results.length - killed,
        score: Number(score.toFixed(1)),
        results,
      };
      console.log(`${name}: ${killed}/${results.length} killed, score ${score.toFixed(1)}%`);
      for (const r of results.filter((x) => x.status === "survived")) console.log(`  survived ${r.id}: ${r.original}  ->  ${r.mutated}`);
    }
  } finally {
    cleanup();
  }
  if (o.out) writeFileSync(o.out, JSON.stringify(report, null, 2) + "\n");
}

// Run, unless imported for its helpers (scripts/break-promises.mjs).
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  });
}

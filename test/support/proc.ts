// Starts project executables as real child processes and stops them: the programs as they ship
// (startProgram), test programs such as the in-memory API's CLI from source through tsx (startTs).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { staleBuilds } from "../../scripts/build-fresh.mjs";
import { StopWaiting, waitFor } from "./wait.js";

export const repoRoot = new URL("../..", import.meta.url).pathname;
const TSX = import.meta.resolve("tsx");

export interface Proc {
  readonly child: ChildProcess;
  /** Everything the process wrote to stdout so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or signal name) once the process has exited. */
  readonly exited: Promise<number | string>;
  /** Waits until stdout+stderr contains `text` (or matches the regexp). */
  waitForOutput(text: string | RegExp, timeoutMs?: number): Promise<void>;
  /** SIGTERM, then SIGKILL after graceMs; resolves with the exit code. */
  stop(graceMs?: number): Promise<number | string>;
}

/** Runs a TypeScript entry point of this repository (path relative to the repo root). */
export function startTs(entry: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Proc {
  // tsx by absolute URL, so a child started in another working directory still finds it.
  return startNode(entry, ["--import", TSX, join(repoRoot, entry), ...args], opts);
}

/** The programs that ship: their sources, and what the image runs (scripts/bundle.mjs; the driver-stub's tsc output). */
const PROGRAMS = {
  sidecar: { source: "sidecar/main.ts", built: "dist/csi-addons-sidecar.mjs" },
  controller: { source: "controller/main.ts", built: "dist/csi-addons-healer-controller.mjs" },
  "driver-stub": { source: "driver-stub/main.ts", built: "dist/driver-stub/main.js" },
} as const;
export type Program = keyof typeof PROGRAMS;

/**
 * TEST_PROGRAMS=source runs the programs from their sources through tsx: mutation testing and the
 * promise breaks edit a source in a copy of the repository and do not build it again.
 */
const fromSource = process.env["TEST_PROGRAMS"] === "source";
const checked = new Set<Program>();

/**
 * Runs one of the programs as it ships: its bundle, built once per `npm test` run (scripts/test.mjs),
 * so each start loads one file instead of compiling TypeScript. A build older than its sources is
 * refused rather than tested (run the file through `npm test -- <file>`, which builds it first).
 */
export function startProgram(name: Program, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Proc {
  const { source, built } = PROGRAMS[name];
  if (fromSource) return startTs(source, args, opts);
  if (!checked.has(name)) {
    const stale = staleBuilds([built]);
    if (stale.length > 0) throw new Error(`${stale[0]!.why}: run the tests through \`npm test -- <file>\` (it builds first) or \`npm run build\``);
    checked.add(name);
  }
  return startJs(built, args, opts);
}

/** Runs compiled JavaScript of this repository (e.g. "dist/driver-stub/main.js"), as the image does. */
export function startJs(entry: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Proc {
  return startNode(entry, [join(repoRoot, entry), ...args], opts);
}

/**
 * Every child a test started and that has not exited yet. The runner ends a test file's process
 * once its last test is over (--test-force-exit, scripts/test.mjs), even when a failed start left
 * an API server or a process behind; whatever is still running then is killed here and named, so
 * a failure never leaves a process on the machine or a file's process waiting for it.
 */
const unstopped = new Map<ChildProcess, string>();
process.once("exit", () => {
  if (unstopped.size === 0) return;
  process.stderr.write(`killing ${unstopped.size} process(es) the tests did not stop: ${[...unstopped.values()].join(", ")}\n`);
  for (const child of unstopped.keys()) child.kill("SIGKILL");
});

function startNode(entry: string, nodeArgs: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string }): Proc {
  const child = spawn(process.execPath, nodeArgs, {
    cwd: opts.cwd ?? repoRoot,
    // A fatal exit writes its reason to TERMINATION_LOG: never the host's /dev/termination-log
    // (a test's own TERMINATION_LOG or --termination-log still wins).
    env: { ...process.env, TERMINATION_LOG: join(tempDir("termination-"), "termination-log"), ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")));
  let done = false;
  unstopped.set(child, `${entry} (pid ${child.pid})`);
  void exited.then(() => ((done = true), unstopped.delete(child)));
  const proc: Proc = {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    async waitForOutput(text, timeoutMs = 15_000) {
      const matches = () => {
        const all = out + err;
        return typeof text === "string" ? all.includes(text) : text.test(all);
      };
      await waitFor(
        `output ${String(text)} from ${entry}`,
        () => {
          if (matches()) return true;
          if (done) throw new StopWaiting(`${entry} exited before printing ${String(text)}; output:\n${out}${err}`);
          return false;
        },
        { timeoutMs },
      );
    },
    stop: (graceMs = 5_000) => (done ? exited : terminate(child, exited, graceMs)),
  };
  return proc;
}

/** SIGTERM, then SIGKILL after graceMs; resolves with what `exited` resolves with. */
export async function terminate<T>(child: ChildProcess, exited: Promise<T>, graceMs: number): Promise<T> {
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}

// Every process a test starts gets one (its termination log) besides the test's own: removed when
// the test file's process exits, so that repeated runs do not fill the machine's /tmp (thousands
// of termination-log directories piled up in a day before they were removed).
// KEEP_TEST_DIRS=1 keeps them, to read a failed test's logs and state files afterwards.
const made: string[] = [];
if (!process.env.KEEP_TEST_DIRS) {
  process.once("exit", () => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true });
  });
}

/**
 * A fresh temporary directory for sockets, state and logs of one test; removed when the test file's
 * process exits, unless `keep` (the demo and the bench remove theirs themselves, and keep it after a failure).
 */
export function tempDir(prefix = "csi-healer-", opts: { keep?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (!opts.keep) made.push(dir);
  return dir;
}

// process/entry: what both programs' main.ts share, in process: which termination log a command
// line names, how --help, --version and a bad flag end (what is printed, the exit code), and how
// a fatal reason reaches the log and the termination log. The programs' process tests (cli.test.ts,
// flags.test.ts, lifecycle.test.ts) show the same end to end, signals and exit included.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fatal, parseCommandLine, setTerminationLog, terminationLogOf, TERMINATION_LOG_FLAG } from "../../../common/process/entry.js";
import { FlagError } from "../../../common/config/flags.js";
import { packageVersion } from "../../../common/util/version.js";
import { repoRoot, tempDir } from "../../support/proc.js";

/** What `fn` writes to stdout and stderr, and its result. */
function printed<T>(fn: () => T): { result: T; out: string; err: string } {
  let out = "";
  let err = "";
  const [o, e] = [process.stdout.write, process.stderr.write];
  process.stdout.write = ((s: string) => ((out += s), true)) as typeof process.stdout.write;
  process.stderr.write = ((s: string) => ((err += s), true)) as typeof process.stderr.write;
  try {
    return { result: fn(), out, err };
  } finally {
    process.stdout.write = o;
    process.stderr.write = e;
  }
}

test("the termination log: --termination-log's value, else the container's default (also for an empty value)", () => {
  assert.equal(TERMINATION_LOG_FLAG.env, "TERMINATION_LOG");
  assert.equal(terminationLogOf(new Map([["termination-log", "/tmp/x.log"]])), "/tmp/x.log");
  assert.equal(terminationLogOf(new Map([["termination-log", ""]])), "/dev/termination-log");
  assert.equal(terminationLogOf(new Map()), "/dev/termination-log");
});

test("the command line: parsed as it is; --help prints the text and --version the name and version, both 0; a bad flag one line on stderr and 2", () => {
  const run = { kind: "run" as const, port: 9070 };
  assert.deepEqual(
    printed(() => parseCommandLine("prog", () => run)),
    { result: run, out: "", err: "" },
  );
  assert.deepEqual(
    printed(() => parseCommandLine("prog", () => ({ kind: "help" as const, text: "Usage: prog [flags]" }))),
    { result: 0, out: "Usage: prog [flags]\n", err: "" },
  );
  assert.deepEqual(
    printed(() => parseCommandLine("prog", () => ({ kind: "version" as const }))),
    { result: 0, out: `prog ${packageVersion()}\n`, err: "" },
  );
  assert.deepEqual(
    printed(() =>
      parseCommandLine("prog", () => {
        throw new FlagError("timeout", "--timeout: not a duration: 5x");
      }),
    ),
    { result: 2, out: "", err: "prog: invalid configuration: --timeout: not a duration: 5x\n" },
  );
  assert.throws(
    () =>
      parseCommandLine("prog", () => {
        throw new TypeError("a bug, not a flag");
      }),
    TypeError,
  );
});

test("fatal: the reason logged at error and written to the termination log, exit code 1; an unwritable termination log is no second failure", () => {
  const file = join(tempDir(), "termination-log");
  const logged: string[] = [];
  const logger = { error: (m: string) => void logged.push(m), info: () => {} };
  setTerminationLog(file);
  try {
    assert.equal(fatal(logger, "cannot bind 0.0.0.0:9070: EADDRINUSE"), 1);
    assert.equal(readFileSync(file, "utf8"), "cannot bind 0.0.0.0:9070: EADDRINUSE\n");
    assert.deepEqual(logged, ["cannot bind 0.0.0.0:9070: EADDRINUSE"]);
    setTerminationLog(join(file, "not-a-dir", "log"));
    assert.equal(fatal(logger, "again"), 1);
    assert.deepEqual(logged, ["cannot bind 0.0.0.0:9070: EADDRINUSE", "again"]);
  } finally {
    setTerminationLog("/dev/termination-log");
  }
});

/**
 * A process whose main settles while something still holds the event loop (as a library's open
 * handle would): its exit code (null when killed after 20 s: its own timer would have kept it).
 */
function exitOf(main: string): Promise<{ code: number | null; terminationLog: string }> {
  const log = join(tempDir(), "termination-log");
  const script = `
    import { exitWhenDone, setTerminationLog } from ${JSON.stringify(join(repoRoot, "common/process/entry.ts"))};
    setTerminationLog(${JSON.stringify(log)});
    setInterval(() => {}, 30_000);
    exitWhenDone(${main}, () => ({ error() {}, info() {} }));`;
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, ["--import", import.meta.resolve("tsx"), "--input-type=module", "-e", script], { timeout: 20_000 }, () => {});
    child.once("error", reject);
    child.once("exit", (code) => {
      let terminationLog = "";
      try {
        terminationLog = readFileSync(log, "utf8");
      } catch {
        // none written
      }
      resolve({ code, terminationLog });
    });
  });
}

test("exit: with main's code once it resolves, and 1 with the reason written down once it rejects, though a handle stays open", async () => {
  const ok = await exitOf("Promise.resolve(3)");
  assert.equal(ok.code, 3);
  assert.equal(ok.terminationLog, "");
  const failed = await exitOf("Promise.reject(new Error('cannot read the kubeconfig'))");
  assert.equal(failed.code, 1);
  assert.equal(failed.terminationLog, "fatal: cannot read the kubeconfig\n");
});

// What every entry point (main.ts) does the same way: wait for SIGTERM/SIGINT, write a fatal
// reason to the log and /dev/termination-log, and exit once the logger has flushed.
import { writeFileSync } from "node:fs";
import { FlagError, type FlagSpec } from "../config/flags.js";
import { packageVersion } from "../util/version.js";

/** The container's terminationMessagePath by default. */
const DEFAULT_TERMINATION_LOG = "/dev/termination-log";

/** Both programs' --termination-log; an entry point passes its value to setTerminationLog(). */
export const TERMINATION_LOG_FLAG: FlagSpec = {
  name: "termination-log",
  kind: "string",
  env: "TERMINATION_LOG",
  help: "file a fatal exit writes its reason to",
  default: DEFAULT_TERMINATION_LOG,
};

/** The --termination-log a parsed command line names; an empty value means the default too. */
export function terminationLogOf(raw: ReadonlyMap<string, string>): string {
  return raw.get(TERMINATION_LOG_FLAG.name) || DEFAULT_TERMINATION_LOG;
}

let terminationLog = DEFAULT_TERMINATION_LOG;

export function setTerminationLog(path: string): void {
  terminationLog = path;
}

type Answered = { kind: "help"; text: string } | { kind: "version" };

/**
 * The parsed command line; or, for --help, --version and bad flags, what was printed and the exit
 * code (0, 0, 2 with one line on stderr naming the flag).
 */
export function parseCommandLine<P extends { kind: string }>(name: string, parse: () => P | Answered): Exclude<P, Answered> | number {
  let parsed: P | Answered;
  try {
    parsed = parse();
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`${name}: invalid configuration: ${err.message}\n`);
    return 2;
  }
  if (parsed.kind === "help") {
    process.stdout.write(`${(parsed as { text: string }).text}\n`);
    return 0;
  }
  if (parsed.kind === "version") {
    process.stdout.write(`${name} ${packageVersion()}\n`);
    return 0;
  }
  return parsed as Exclude<P, Answered>;
}

interface ErrorLog {
  error(message: string): unknown;
  info(message: string, meta?: object): unknown;
}

/** Resolves on the first SIGTERM or SIGINT. */
export function untilSignal(logger: ErrorLog): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info("signal received; shutting down", { signal });
      resolve();
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
}

/** Logs the reason and writes it to the termination log; returns exit code 1. */
export function fatal(logger: ErrorLog, reason: string): number {
  logger.error(reason);
  try {
    writeFileSync(terminationLog, `${reason}\n`);
  } catch {
    // Not in a container (or not writable): the log line above is all we can do.
  }
  return 1;
}

/** Exits with main's code (1 if it throws), after letting winston flush, even if a library keeps a handle open. */
export function exitWhenDone(main: Promise<number>, logger: () => ErrorLog): void {
  main.then(
    (code) => {
      process.exitCode = code;
      setTimeout(() => process.exit(code), 200).unref();
    },
    (err: unknown) => {
      process.exitCode = fatal(logger(), `fatal: ${err instanceof Error ? err.message : String(err)}`);
      setTimeout(() => process.exit(1), 200).unref();
    },
  );
}

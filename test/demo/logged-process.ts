// One of our programs (the sidecar, the healer controller) as a real process whose JSON log goes
// to a file, not to our terminal: started, recognised as up by its own "started" log line, probed
// over its HTTP endpoint (/readyz, /metrics), and stopped with SIGTERM (SIGKILL after a grace).
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot, terminate } from "../support/proc.js";
import { waitFor } from "../support/wait.js";

export interface LogLine {
  message: string;
  timestamp: string;
  [key: string]: unknown;
}

export interface LoggedProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Date.now() just before the spawn. */
  readonly spawnedAt: number;
  readonly logFile: string;
  readonly exited: Promise<number | string>;
  /** Its "started" log line (it names the ports it bound). */
  readonly started: LogLine;
  /** The JSON lines of the log file so far (anything else — a stray stderr line — is skipped). */
  logLines(): LogLine[];
  /** GET /readyz: the status code and the body (the reason). */
  readyz(): Promise<{ status: number; body: string }>;
  metrics(): Promise<string>;
  /** Waits until /readyz answers `status` (200 = ready, 503 = not). */
  waitReadyz(status: 200 | 503, timeoutMs?: number): Promise<void>;
  /** waitFor, but giving up at once if the process exits meanwhile. */
  waitWhileRunning<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs?: number, intervalMs?: number): Promise<T>;
  /** SIGTERM (it drains and exits 0), SIGKILL after graceMs. */
  stop(graceMs?: number): Promise<number | string>;
}

export interface LoggedSpawnOptions {
  /** For messages: "the sidecar". */
  what: string;
  /** Relative to the repository: a .ts file runs through tsx, a .js/.mjs file (dist/) as it is. */
  entry: string;
  /** Node's own flags, before the entry (e.g. the V8 flags the image gives the sidecar). */
  nodeArgs?: readonly string[];
  args: string[];
  /** Environment added to ours, e.g. NODE_OPTIONS. */
  env?: NodeJS.ProcessEnv;
  logFile: string;
  /** The log message that says it is up; its `httpPort` field is where /readyz and /metrics are. */
  startedMessage: string;
}

export function readLogLines(file: string): LogLine[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  const lines: LogLine[] = [];
  for (const l of text.split("\n")) {
    if (!l.startsWith("{")) continue;
    try {
      lines.push(JSON.parse(l) as LogLine);
    } catch {
      // a line still being written
    }
  }
  return lines;
}

export async function spawnLogged(o: LoggedSpawnOptions): Promise<LoggedProcess> {
  const entry = o.entry.endsWith(".ts") ? ["--import", "tsx", join(repoRoot, o.entry)] : [join(repoRoot, o.entry)];
  const fd = openSync(o.logFile, "a");
  const spawnedAt = Date.now();
  const child = spawn(process.execPath, [...(o.nodeArgs ?? []), ...entry, ...o.args], {
    cwd: repoRoot,
    stdio: ["ignore", fd, fd],
    // A fatal exit's reason goes beside the log, never to the host's /dev/termination-log.
    env: { ...process.env, TERMINATION_LOG: `${o.logFile}.termination-log`, ...o.env },
  });
  closeSync(fd);
  const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")));
  const running = () => child.exitCode === null && child.signalCode === null;
  const logLines = () => readLogLines(o.logFile);
  const waitWhileRunning = async <T>(
    what: string,
    probe: () => T | undefined | false | Promise<T | undefined | false>,
    timeoutMs = 30_000,
    intervalMs?: number,
  ): Promise<T> => {
    const gone = Symbol("exited");
    const r = await waitFor<T | typeof gone>(what, () => (running() ? probe() : gone), { timeoutMs, intervalMs });
    if (r === gone) throw new Error(`${o.what} exited (${child.exitCode ?? child.signalCode}) while waiting for ${what}; see ${o.logFile}`);
    return r;
  };
  let started: LogLine;
  try {
    started = await waitWhileRunning(`${o.what}'s "${o.startedMessage}" log line`, () => logLines().find((l) => l.message === o.startedMessage));
  } catch (err) {
    if (running()) child.kill("SIGKILL");
    await exited;
    throw err;
  }
  const http = (path: string) => fetch(`http://127.0.0.1:${started["httpPort"] as number}${path}`);
  const readyz = async () => {
    const res = await http("/readyz");
    return { status: res.status, body: (await res.text()).trim() };
  };
  return {
    child,
    pid: child.pid!,
    spawnedAt,
    logFile: o.logFile,
    exited,
    started,
    logLines,
    readyz,
    metrics: async () => (await http("/metrics")).text(),
    async waitReadyz(status, timeoutMs = 30_000) {
      await waitWhileRunning(`${o.what}'s /readyz to answer ${status}`, async () => (await readyz().catch(() => undefined))?.status === status, timeoutMs);
    },
    waitWhileRunning,
    stop: (graceMs = 10_000) => (running() ? terminate(child, exited, graceMs) : exited),
  };
}

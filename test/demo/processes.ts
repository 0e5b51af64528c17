// What the demo and the bench share about the processes they start: the sidecar as a real process
// whose JSON log goes to a file (not to our terminal), and one place that stops everything that was
// started — in reverse order, once, also on failure and on Ctrl-C.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { NAMESPACE, NODE, POD } from "../support/fixtures.js";
import { repoRoot, terminate } from "../support/proc.js";
import { waitFor } from "../support/wait.js";

export interface LogLine {
  message: string;
  timestamp: string;
  [key: string]: unknown;
}

export interface SidecarProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Date.now() just before the spawn. */
  readonly spawnedAt: number;
  readonly port: number;
  readonly httpPort: number;
  /** host:port of the controller-facing gRPC server. */
  readonly address: string;
  readonly logFile: string;
  readonly exited: Promise<number | string>;
  /** The JSON lines of the log file so far (anything else — a stray stderr line — is skipped). */
  logLines(): LogLine[];
  /** GET /readyz: the status code and the body (the reason). */
  readyz(): Promise<{ status: number; body: string }>;
  metrics(): Promise<string>;
  /** Waits until /readyz answers `status` (200 = SERVING, 503 = NOT_SERVING). */
  waitReadyz(status: 200 | 503, timeoutMs?: number): Promise<void>;
  /** SIGTERM (the sidecar drains and exits 0), SIGKILL after graceMs. */
  stop(graceMs?: number): Promise<number | string>;
}

export interface SidecarSpawnOptions {
  /** "source": sidecar/main.ts through tsx; "compiled": dist/sidecar/main.js (what the image runs). */
  build: "source" | "compiled";
  driverSocket: string;
  kubeconfig: string;
  logFile: string;
  /** More flags, e.g. ["--max-inflight=32"]. */
  args?: string[];
  /** Environment added to ours, e.g. NODE_OPTIONS. */
  env?: NodeJS.ProcessEnv;
}

/** The flags of a local sidecar: fixture pod/node, ephemeral ports on 127.0.0.1, caller auth off. */
export function localSidecarArgs(o: SidecarSpawnOptions): string[] {
  return [
    `--csi-addons-address=unix://${o.driverSocket}`,
    `--node-id=${NODE}`,
    `--pod=${POD}`,
    `--namespace=${NAMESPACE}`,
    "--controller-ip=127.0.0.1",
    "--controller-port=0",
    "--http-endpoint=127.0.0.1:0",
    `--kubeconfig=${o.kubeconfig}`,
    "--enable-auth=false",
    ...(o.args ?? []),
  ];
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

export async function spawnSidecar(o: SidecarSpawnOptions): Promise<SidecarProcess> {
  const entry = o.build === "source" ? ["--import", "tsx", join(repoRoot, "sidecar/main.ts")] : [join(repoRoot, "dist/sidecar/main.js")];
  const fd = openSync(o.logFile, "a");
  const spawnedAt = Date.now();
  const child = spawn(process.execPath, [...entry, ...localSidecarArgs(o)], { cwd: repoRoot, stdio: ["ignore", fd, fd], env: { ...process.env, ...o.env } });
  closeSync(fd);
  const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")));
  const running = () => child.exitCode === null && child.signalCode === null;
  const logLines = () => readLogLines(o.logFile);
  /** waitFor, but giving up as soon as the sidecar exits (waitFor itself retries on errors). */
  const waitWhileRunning = async <T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs: number): Promise<T> => {
    const gone = Symbol("exited");
    const r = await waitFor<T | typeof gone>(what, () => (running() ? probe() : gone), { timeoutMs });
    if (r === gone) throw new Error(`the sidecar exited (${child.exitCode ?? child.signalCode}) while waiting for ${what}; see ${o.logFile}`);
    return r;
  };
  let started: LogLine;
  try {
    started = await waitWhileRunning("the sidecar's \"sidecar started\" log line", () => logLines().find((l) => l.message === "sidecar started"), 30_000);
  } catch (err) {
    if (running()) child.kill("SIGKILL");
    await exited;
    throw err;
  }
  const port = started["controllerPort"] as number;
  const httpPort = started["httpPort"] as number;
  const http = (path: string) => fetch(`http://127.0.0.1:${httpPort}${path}`);
  const readyz = async () => {
    const res = await http("/readyz");
    return { status: res.status, body: (await res.text()).trim() };
  };
  return {
    child,
    pid: child.pid!,
    spawnedAt,
    port,
    httpPort,
    address: `127.0.0.1:${port}`,
    logFile: o.logFile,
    exited,
    logLines,
    readyz,
    metrics: async () => (await http("/metrics")).text(),
    async waitReadyz(status, timeoutMs = 30_000) {
      await waitWhileRunning(`the sidecar's /readyz to answer ${status}`, async () => (await readyz().catch(() => undefined))?.status === status, timeoutMs);
    },
    stop: (graceMs = 10_000) => (running() ? terminate(child, exited, graceMs) : exited),
  };
}

/**
 * Everything started, to be stopped in reverse order exactly once. `onSignal` runs the cleanup
 * on SIGINT/SIGTERM and then exits 130/143 (the shell convention for "killed by a signal").
 */
export class Cleanup {
  private readonly actions: { what: string; run: () => Promise<unknown> | unknown }[] = [];
  private running: Promise<string[]> | undefined;
  /** Set once a signal started the cleanup: the main flow then stops reporting its own errors. */
  interrupted = false;

  private late: Promise<string[]> = Promise.resolve([]);
  private flow: Promise<unknown> = Promise.resolve();

  /** The main flow, which must notice `interrupted` and give up soon; a signal waits for it. */
  watch<T>(flow: Promise<T>): Promise<T> {
    this.flow = flow.catch(() => undefined);
    return flow;
  }

  /**
   * Registers how to stop something just started. Once the cleanup has begun (a signal arrived
   * while the thing was starting), it is stopped right away instead.
   */
  add(what: string, run: () => Promise<unknown> | unknown): void {
    if (this.running === undefined) {
      this.actions.push({ what, run });
      return;
    }
    this.late = this.late.then(async (failed) => {
      try {
        await run();
      } catch (err) {
        failed.push(`${what}: ${err instanceof Error ? err.message : String(err)}`);
      }
      return failed;
    });
  }

  /** Runs every action (last added first); returns the ones that failed, described. */
  run(): Promise<string[]> {
    this.running ??= (async () => {
      const failed: string[] = [];
      for (const a of this.actions.splice(0).reverse()) {
        try {
          await a.run();
        } catch (err) {
          failed.push(`${a.what}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
      return failed;
    })();
    return this.running;
  }

  /** On SIGINT/SIGTERM: run the cleanup, then exit with `exitCode()` (default 130/143). */
  onSignal(say: (line: string) => void, exitCode?: () => number): void {
    for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
      process.once(signal, () => {
        this.interrupted = true;
        say(`\n${signal}: stopping everything this run started ...`);
        void this.run().then(async (failed) => {
          // The interrupted main flow may be starting a process right now: wait until it has
          // given up, so that what it started meanwhile (see add) is stopped too.
          await this.flow;
          failed.push(...(await this.late));
          for (const f of failed) say(`cleanup failed: ${f}`);
          process.exit(failed.length > 0 ? 1 : (exitCode?.() ?? code));
        });
      });
    }
  }
}

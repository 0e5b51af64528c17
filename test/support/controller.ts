// Starts the healer controller as a real process (from source, through tsx) and reads what it
// reports: its JSON log (one line per heal decision), /metrics, /readyz.
import { type Proc, startProgram } from "./proc.js";
import { parseLines } from "./sidecar.js";
import { waitFor } from "./wait.js";

export interface ControllerOptions {
  kubeconfig: string;
  /** Extra flags. Plaintext to the sidecars and no leader election unless these say otherwise. */
  args?: string[];
  env?: NodeJS.ProcessEnv;
  /** Wait for "controller started" (default true). */
  waitStarted?: boolean;
}

export interface ControllerProc {
  readonly proc: Proc;
  httpPort(): number;
  logLines(): Record<string, unknown>[];
  /** The "heal" decision lines, optionally only those with these fields. */
  heals(match?: Record<string, unknown>): Record<string, unknown>[];
  metrics(): Promise<string>;
  readyz(): Promise<number>;
  stop(): Promise<number | string>;
  /** SIGKILL: a crashed replica, no lease release. */
  kill(): Promise<number | string>;
}

/** Test defaults: quick retries and leader election timings, no periodic pass unless asked for. */
export const FAST_ARGS = ["--retry-initial-backoff=100ms", "--retry-max-backoff=1s", "--check-interval=0", "--log-level=debug"];

export async function startControllerProc(opts: ControllerOptions): Promise<ControllerProc> {
  const given = opts.args ?? [];
  const has = (flag: string) => given.some((a) => a.startsWith(flag));
  const args = [
    `--kubeconfig=${opts.kubeconfig}`,
    "--http-endpoint=127.0.0.1:0",
    ...(has("--sidecar-tls") ? [] : ["--sidecar-tls=false"]),
    ...(has("--leader-elect") ? [] : ["--leader-elect=false"]),
    ...FAST_ARGS.filter((a) => !has(a.split("=")[0]!)),
    ...given,
  ];
  const proc = startProgram("controller", args, { env: opts.env });
  const logLines = () => parseLines(proc.stdout());
  const httpPort = () => (logLines().find((l) => l["message"] === "controller started")?.["httpPort"] as number) ?? 0;
  const get = (path: string) => fetch(`http://127.0.0.1:${httpPort()}${path}`);
  if (opts.waitStarted !== false) await proc.waitForOutput('"message":"controller started"', 30_000);
  return {
    proc,
    httpPort,
    logLines,
    heals: (match = {}) => logLines().filter((l) => l["message"] === "heal" && Object.entries(match).every(([k, v]) => l[k] === v)),
    metrics: async () => (await get("/metrics")).text(),
    readyz: async () => (await get("/readyz")).status,
    stop: () => proc.stop(10_000),
    async kill() {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill("SIGKILL");
      return proc.exited;
    },
  };
}

/** Waits until the controller's log has a line with these fields. */
export function waitLog(c: ControllerProc, match: Record<string, unknown>, timeoutMs = 30_000): Promise<Record<string, unknown>> {
  return waitFor(`controller log ${JSON.stringify(match)}`, () => c.logLines().find((l) => Object.entries(match).every(([k, v]) => l[k] === v)), { timeoutMs });
}

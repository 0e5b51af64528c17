// Starts the driver-stub as a real process on its real sockets, with a state file and a call log
// in one directory, for the stub's own tests and the sidecar's.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CallLogEntry } from "../../driver-stub/call-log.js";
import type { StubState } from "../../driver-stub/state.js";
import { startProgram, tempDir, type Proc } from "./proc.js";

export type { CallLogEntry, StubState };

export interface DriverStubOptions {
  /** Driver name (--name); default "stub.csi.example.com". */
  name?: string;
  /** Directory for sockets, state file and call log; default a fresh temporary one. */
  dir?: string;
  /** Written to the state file before the start; without it the file is left as it is. */
  state?: StubState;
  extraArgs?: string[];
  /** How long to wait for "driver-stub ready" (default 15 s; many stubs starting at once on a busy machine need more). */
  readyTimeoutMs?: number;
}

export interface CallFilter {
  server?: "addons" | "csi";
  /** Full path ("/healer.v1.VolumeHealerNode/NodeHealVolume") or bare method name ("NodeHealVolume"). */
  method?: string;
  volumeId?: string;
}

export interface DriverStub {
  readonly name: string;
  readonly dir: string;
  /** When the stub was ready (both sockets bound), by its own clock, as its call log's times. */
  readonly readyAt: number;
  readonly addonsEndpoint: string;
  readonly addonsSocket: string;
  readonly csiEndpoint: string;
  readonly csiSocket: string;
  readonly stateFile: string;
  readonly callLogFile: string;
  readonly proc: Proc;
  readonly options: DriverStubOptions;
  /** Replaces the state file atomically (the stub never sees a half-written file). */
  setState(state: StubState): void;
  /** Reads, changes and atomically rewrites the state file. */
  updateState(change: (state: StubState) => StubState | void): void;
  readState(): StubState;
  /** The call log so far, parsed, optionally filtered. */
  calls(filter?: CallFilter): CallLogEntry[];
  csiCalls(): CallLogEntry[];
  /**
   * Calls of a VolumeHealerNode method for a volume that have reached the stub so far. The call
   * log is written when a call ends; this counts the line the stub prints when one arrives.
   */
  arrived(method: "NodeGetVolumeHealth" | "NodeHealVolume", volumeId: string): number;
  /** SIGTERM; resolves with the exit code. */
  stop(): Promise<number | string>;
  /** SIGKILL, as a crashing driver container: leaves stale socket files. */
  kill(): Promise<number | string>;
}

export const DEFAULT_DRIVER_NAME = "stub.csi.example.com";

let tmpCounter = 0;

function writeAtomically(file: string, state: StubState): void {
  const tmp = `${file}.${process.pid}.${++tmpCounter}.tmp`;
  writeFileSync(tmp, JSON.stringify(state, null, 2) + "\n");
  renameSync(tmp, file);
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

function matches(entry: CallLogEntry, f: CallFilter): boolean {
  if (f.server !== undefined && entry.server !== f.server) return false;
  if (f.method !== undefined && entry.method !== f.method && !entry.method.endsWith(`/${f.method}`)) return false;
  if (f.volumeId !== undefined && (entry.request as { volumeId?: string }).volumeId !== f.volumeId) return false;
  return true;
}

/** Starts a stub and waits until both sockets are bound ("driver-stub ready"). */
export async function startDriverStub(opts: DriverStubOptions = {}): Promise<DriverStub> {
  const name = opts.name ?? DEFAULT_DRIVER_NAME;
  const dir = opts.dir ?? tempDir("driver-stub-");
  const addonsSocket = join(dir, "addons.sock");
  const csiSocket = join(dir, "csi.sock");
  const stateFile = join(dir, "state.json");
  const callLogFile = join(dir, "calls.jsonl");
  if (opts.state !== undefined) writeAtomically(stateFile, opts.state);
  const proc = startProgram("driver-stub", [
    `--name=${name}`,
    `--addons-endpoint=unix://${addonsSocket}`,
    `--csi-endpoint=unix://${csiSocket}`,
    `--state=${stateFile}`,
    `--call-log=${callLogFile}`,
    ...(opts.extraArgs ?? []),
  ]);
  const stub: Omit<DriverStub, "readyAt"> = {
    name,
    dir,
    addonsEndpoint: `unix://${addonsSocket}`,
    addonsSocket,
    csiEndpoint: `unix://${csiSocket}`,
    csiSocket,
    stateFile,
    callLogFile,
    proc,
    options: { ...opts, name, dir },
    setState: (state) => writeAtomically(stateFile, state),
    updateState(change) {
      const current = stub.readState();
      writeAtomically(stateFile, change(current) ?? current);
    },
    readState() {
      const text = readText(stateFile);
      return text === undefined ? {} : (JSON.parse(text) as StubState);
    },
    arrived(method, volumeId) {
      return proc.stdout().split(`recv /healer.v1.VolumeHealerNode/${method} ${volumeId}\n`).length - 1;
    },
    calls(filter = {}) {
      return (readText(callLogFile) ?? "")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line) as CallLogEntry)
        .filter((entry) => matches(entry, filter));
    },
    csiCalls: () => stub.calls({ server: "csi" }),
    stop: () => proc.stop(),
    async kill() {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill("SIGKILL");
      return proc.exited;
    },
  };
  try {
    await proc.waitForOutput(/^driver-stub ready$/m, opts.readyTimeoutMs);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  const bound = /^sockets bound at (\d+) ms since the epoch$/m.exec(proc.stdout());
  if (!bound) {
    await proc.stop();
    throw new Error(`driver-stub said it was ready without saying when its sockets were bound:\n${proc.stdout()}`);
  }
  return Object.assign(stub, { readyAt: Number(bound[1]) });
}

/**
 * Starts a new stub process on the same directory, sockets, state file and call log (a driver
 * restart: new boot id, same volumes). Stops the old process first if it still runs; kill() it
 * before to simulate a crash that leaves stale sockets behind.
 */
export async function restartDriverStub(stub: DriverStub, opts: Pick<DriverStubOptions, "state" | "extraArgs"> = {}): Promise<DriverStub> {
  await stub.stop();
  return startDriverStub({ ...stub.options, ...opts });
}

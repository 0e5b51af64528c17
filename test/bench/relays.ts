// The bench's handle on the two relays it measures beside the sidecar: bare-relay.ts (one Node hop,
// nothing else) and grpc-js-relay.ts (one hop through the decided stack's server and client). Both
// start with the sidecar's V8 flags, so that they differ from the sidecar only in what the sidecar
// does, and as plain JavaScript: Node running a .ts file loads its type stripper (a WebAssembly
// module), which would be half the idle RSS a relay is there to show. grpc-js-relay.ts is bundled
// with the sidecar's own bundle options (scripts/bundle.mjs) and runs with NODE_ENV=production, as
// the image runs the sidecar.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build, transform } from "esbuild";
import { BUNDLE_OPTIONS } from "../../scripts/bundle.mjs";
import { repoRoot, tempDir } from "../support/proc.js";
import { SIDECAR_NODE_FLAGS } from "./image.js";

export interface Relay {
  readonly pid: number;
  /** host:port of its HTTP/2 server. */
  readonly address: string;
  stop(): Promise<void>;
}

export const RELAY_KINDS = ["bare", "grpcJs"] as const;
export type RelayKind = (typeof RELAY_KINDS)[number];

const SOURCES: Record<RelayKind, string> = { bare: "test/bench/bare-relay.ts", grpcJs: "test/bench/grpc-js-relay.ts" };

async function compile(kind: RelayKind): Promise<string> {
  if (kind === "bare") return (await transform(readFileSync(join(repoRoot, SOURCES.bare), "utf8"), { loader: "ts", format: "esm" })).code;
  const out = await build({ ...BUNDLE_OPTIONS, absWorkingDir: repoRoot, entryPoints: [SOURCES.grpcJs], write: false });
  return out.outputFiles[0]!.text;
}

/**
 * Each relay's program, made and written once per bench (the restart headline starts a relay per
 * driver per run), in a directory removed when the bench exits.
 */
const programs: Partial<Record<RelayKind, Promise<string>>> = {};
let programDir: string | undefined;

async function program(kind: RelayKind): Promise<string> {
  programDir ??= tempDir("bench-relays-");
  const file = join(programDir, `${kind}-relay.mjs`);
  writeFileSync(file, await compile(kind));
  return file;
}

/** Starts a relay; the grpc-js relay lets at most `maxInflight` calls reach the driver at once, when given. */
export async function startRelay(kind: RelayKind, driverSocket: string, maxInflight?: number): Promise<Relay> {
  if (maxInflight !== undefined && kind !== "grpcJs") throw new Error(`the ${kind} relay has no limit of calls in flight`);
  const limit = maxInflight === undefined ? [] : [String(maxInflight)];
  const child = spawn(process.execPath, [...SIDECAR_NODE_FLAGS, await (programs[kind] ??= program(kind)), driverSocket, ...limit], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, NODE_ENV: "production" },
  });
  const exited = once(child, "exit");
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  const port = await Promise.race([
    once(child.stdout!, "data").then(([d]) => String(d).trim()),
    exited.then(([code, signal]) => Promise.reject(new Error(`the ${kind} relay exited (${code ?? signal}) before it listened`))),
  ]);
  return { pid: child.pid!, address: `127.0.0.1:${port}`, stop };
}

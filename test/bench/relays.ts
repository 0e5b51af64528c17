// The bench's handle on the two relays it measures beside the sidecar: bare-relay.ts (one Node hop,
// nothing else) and grpc-js-relay.ts (one hop through the decided stack's server and client). Both
// start with the sidecar's V8 flags, so that they differ from the sidecar only in what the sidecar
// does, and as plain JavaScript: Node running a .ts file loads its type stripper (a WebAssembly
// module), which would be half the idle RSS a relay is there to show. grpc-js-relay.ts is bundled
// as the sidecar is (one ES module, its libraries in it, NODE_ENV=production as in the image).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildSync, transformSync } from "esbuild";
import { repoRoot } from "../support/proc.js";
import { SIDECAR_NODE_FLAGS } from "./image.js";

export interface Relay {
  readonly pid: number;
  /** host:port of its HTTP/2 server. */
  readonly address: string;
  stop(): Promise<void>;
}

export type RelayKind = "bare" | "grpc-js";

/** Each relay as JavaScript, made once per bench (the restart headline starts a relay per driver per run). */
const javascript: Partial<Record<RelayKind, string>> = {};

function compile(kind: RelayKind): string {
  if (kind === "bare") return transformSync(readFileSync(join(repoRoot, "test/bench/bare-relay.ts"), "utf8"), { loader: "ts", format: "esm" }).code;
  const out = buildSync({
    absWorkingDir: repoRoot,
    entryPoints: ["test/bench/grpc-js-relay.ts"],
    bundle: true,
    write: false,
    platform: "node",
    format: "esm",
    target: "node20",
    minifySyntax: true,
    minifyWhitespace: true,
    legalComments: "none",
    logLevel: "warning",
    // CommonJS dependencies call require() for Node's built-ins; an ES module has none of its own.
    banner: { js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);' },
  });
  return out.outputFiles[0]!.text;
}

/**
 * Starts a relay from a JavaScript copy written into `dir`; the grpc-js relay lets at most
 * `maxInflight` calls reach the driver at once, when given.
 */
export async function startRelay(kind: RelayKind, driverSocket: string, dir: string, maxInflight?: number): Promise<Relay> {
  if (maxInflight !== undefined && kind !== "grpc-js") throw new Error(`the ${kind} relay has no limit of calls in flight`);
  const program = join(dir, `${kind}-relay.mjs`);
  writeFileSync(program, (javascript[kind] ??= compile(kind)));
  const limit = maxInflight === undefined ? [] : [String(maxInflight)];
  const child = spawn(process.execPath, [...SIDECAR_NODE_FLAGS, program, driverSocket, ...limit], {
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

// The bench's handle on bare-relay.ts: started with the sidecar's V8 flags, so that the two relays
// differ only in what the sidecar does, and as plain JavaScript: Node running a .ts file loads its
// type stripper (a WebAssembly module), which would be half the idle RSS the relay is there to show.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { transformSync } from "esbuild";
import { repoRoot } from "../support/proc.js";
import { SIDECAR_NODE_FLAGS } from "./image.js";

export interface BareRelay {
  readonly pid: number;
  /** host:port of its HTTP/2 server. */
  readonly address: string;
  stop(): Promise<void>;
}

/** bare-relay.ts as JavaScript, made once per bench (the restart headline starts a relay per driver per run). */
let javascript: string | undefined;

/** Starts the relay from a JavaScript copy of bare-relay.ts written into `dir`. */
export async function startBareRelay(driverSocket: string, dir: string): Promise<BareRelay> {
  const program = join(dir, "bare-relay.mjs");
  javascript ??= transformSync(readFileSync(join(repoRoot, "test/bench/bare-relay.ts"), "utf8"), { loader: "ts", format: "esm" }).code;
  writeFileSync(program, javascript);
  const child = spawn(process.execPath, [...SIDECAR_NODE_FLAGS, program, driverSocket], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = once(child, "exit");
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  const port = await Promise.race([
    once(child.stdout!, "data").then(([d]) => String(d).trim()),
    exited.then(([code, signal]) => Promise.reject(new Error(`the bare relay exited (${code ?? signal}) before it listened`))),
  ]);
  return { pid: child.pid!, address: `127.0.0.1:${port}`, stop };
}

// The call log: one JSON line per RPC, written when the call is answered or dies, so a test that
// got its answer can read the line at once. Secret values never leave this process: the log keeps
// a short digest of each, so a test can check the driver got the right value without seeing it.
import { createHash } from "node:crypto";
import { closeSync, openSync, writeSync } from "node:fs";

export type ServerName = "addons" | "csi";

export interface CallLogEntry {
  /** Receipt time, ISO 8601. */
  time: string;
  server: ServerName;
  /** "/full.Service/Method". */
  method: string;
  /** The request as proto JSON (lowerCamelCase), secret values replaced by their secretDigest(). */
  request: unknown;
  /** Receipt and answer times in ms since the epoch (performance clock, sub-ms precision). */
  t0: number;
  t1: number;
  /** The call's deadline (from the caller's grpc-timeout) in ms since the epoch; null without one. */
  deadline: number | null;
  /** When the caller cancelled the call or its deadline passed, in ms since the epoch; null when answered. */
  cancelled: number | null;
  /** gRPC status name of the answer ("OK", "ABORTED", "CANCELLED", ...). */
  code: string;
}

/**
 * What the call log shows for a secret value: "sha256:" and the first 16 hex digits of its SHA-256.
 * Enough to tell values apart in a test, never the value itself.
 */
export function secretDigest(value: string): string {
  return `sha256:${createHash("sha256").update(value).digest("hex").slice(0, 16)}`;
}

/**
 * Replaces the value of every entry of every `secrets` map (the fields marked csi_secret in
 * NodeStageVolumeRequest and NodeHealVolumeRequest) by its secretDigest(), keeping the keys.
 * The one place the call log redacts: every service of the stub logs through it.
 */
export function redactSecrets(json: unknown): unknown {
  if (Array.isArray(json)) return json.map(redactSecrets);
  if (typeof json !== "object" || json === null) return json;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(json)) {
    if (key === "secrets" && typeof value === "object" && value !== null) {
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, secretDigest(String(v))]));
    } else {
      out[key] = redactSecrets(value);
    }
  }
  return out;
}

export class CallLog {
  private fd: number | undefined;

  constructor(file: string | undefined) {
    // Opened once in append mode: each line is one write(2), so concurrent calls never interleave.
    this.fd = file === undefined ? undefined : openSync(file, "a");
  }

  write(entry: CallLogEntry): void {
    if (this.fd === undefined) return;
    writeSync(this.fd, JSON.stringify(entry) + "\n");
  }

  /** Later writes (calls cut off by a forced shutdown) are dropped rather than thrown. */
  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/** Wall-clock milliseconds with sub-millisecond precision, comparable across processes. */
export function preciseNow(): number {
  return performance.timeOrigin + performance.now();
}

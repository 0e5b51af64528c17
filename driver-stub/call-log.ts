// The call log: one JSON line per RPC, written when the call is answered or dies, so a test that
// got its answer can read the line at once. Secret values never leave this process.
import { closeSync, openSync, writeSync } from "node:fs";

export type ServerName = "addons" | "csi";

export interface CallLogEntry {
  /** Receipt time, ISO 8601. */
  time: string;
  server: ServerName;
  /** "/full.Service/Method". */
  method: string;
  /** The request as proto JSON (lowerCamelCase), secret values replaced by "***". */
  request: unknown;
  /** Receipt and answer times in ms since the epoch (performance clock, sub-ms precision). */
  t0: number;
  t1: number;
  /** gRPC status name of the answer ("OK", "ABORTED", "CANCELLED", ...). */
  code: string;
}

export const REDACTED = "***";

/**
 * Replaces the value of every entry of every `secrets` map (the fields marked csi_secret in
 * NodeStageVolumeRequest and NodeHealVolumeRequest), keeping the keys so tests see which arrived.
 */
export function redactSecrets(json: unknown): unknown {
  if (Array.isArray(json)) return json.map(redactSecrets);
  if (typeof json !== "object" || json === null) return json;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(json)) {
    if (key === "secrets" && typeof value === "object" && value !== null) {
      out[key] = Object.fromEntries(Object.keys(value).map((k) => [k, REDACTED]));
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

// DESIGN 7.3: which answers are worth another attempt, and how long to wait before it.
import { status } from "@grpc/grpc-js";

const RETRYABLE = new Set<number>([status.UNAVAILABLE, status.RESOURCE_EXHAUSTED, status.ABORTED, status.DEADLINE_EXCEEDED]);

/** Retry only what a later attempt can change; a refusal or a bad request stays what it is. */
export function isRetryable(code: number): boolean {
  return RETRYABLE.has(code);
}

/** Exponential backoff with full jitter in [d/2, d]: attempt 1 waits about initialMs. */
export function backoffMs(attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
  const d = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(d / 2 + random() * (d / 2));
}

/** The next periodic check of a sidecar: interval ± 10 %, so sidecars do not all fire at once. */
export function jittered(intervalMs: number, random: () => number = Math.random): number {
  return Math.round(intervalMs * (0.9 + random() * 0.2));
}

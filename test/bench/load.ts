// Closed-loop load: `concurrency` workers, each sending its next call as soon as the last one
// answered, until `calls` calls were made. Latency is measured per call, throughput over the run.
import { performance } from "node:perf_hooks";
import { codeName, type Outcome } from "../support/grpc.js";

export interface LoadResult {
  concurrency: number;
  calls: number;
  wallMs: number;
  p50Ms: number;
  p99Ms: number;
  throughputPerS: number;
}

/** Nearest-rank percentile of ascending values. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1]!;
}

/**
 * Runs the load; `send(worker, i)` makes call number i from worker `worker`. Any failed call fails
 * the run: a benchmark of errors measures nothing.
 */
export async function runLoad(
  concurrency: number,
  calls: number,
  send: (worker: number, i: number) => Promise<Outcome<unknown>>,
): Promise<LoadResult> {
  const latencies: number[] = [];
  let next = 0;
  let failure: string | undefined;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (failure === undefined && next < calls) {
        const i = next++;
        const t0 = performance.now();
        const o = await send(worker, i);
        latencies.push(performance.now() - t0);
        if (!o.ok) failure ??= `call ${i} failed: ${codeName(o.code)} ${o.details}`;
      }
    }),
  );
  const wallMs = performance.now() - started;
  if (failure !== undefined) throw new Error(failure);
  latencies.sort((a, b) => a - b);
  return { concurrency, calls, wallMs, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), throughputPerS: (calls / wallMs) * 1000 };
}

/** The most [t0, t1] intervals that overlap at one moment (driver calls at once, from the call log). */
export function maxOverlap(intervals: readonly { t0: number; t1: number }[]): number {
  const starts = intervals.map((i) => i.t0).sort((a, b) => a - b);
  const ends = intervals.map((i) => i.t1).sort((a, b) => a - b);
  let open = 0;
  let max = 0;
  for (let s = 0, e = 0; s < starts.length; ) {
    if (starts[s]! < ends[e]!) {
      max = Math.max(max, ++open);
      s++;
    } else {
      open--;
      e++;
    }
  }
  return max;
}

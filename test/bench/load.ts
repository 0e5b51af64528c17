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
  return summarize(concurrency, [await timedLoad(concurrency, calls, send)]);
}

/** One run's latencies and wall time, to be summarized alone or pooled with others (summarize). */
export interface TimedLoad {
  latencies: number[];
  wallMs: number;
}

export async function timedLoad(concurrency: number, calls: number, send: (worker: number, i: number) => Promise<Outcome<unknown>>): Promise<TimedLoad> {
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
  return { latencies, wallMs };
}

/** Runs of one load taken as one: every latency pooled, their wall times added. */
export function summarize(concurrency: number, runs: readonly TimedLoad[]): LoadResult {
  const latencies = runs.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const wallMs = runs.reduce((t, r) => t + r.wallMs, 0);
  const calls = latencies.length;
  return { concurrency, calls, wallMs, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), throughputPerS: (calls / wallMs) * 1000 };
}

/**
 * The order of `items` in each of `rounds` rounds: each round starts one item later than the one
 * before, so that no item always runs first or always follows the same other one.
 */
export function turns<T>(items: readonly T[], rounds: number): T[][] {
  return Array.from({ length: rounds }, (_, r) => items.map((_, k) => items[(k + r) % items.length]!));
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

/**
 * Sends one call per item, at most `perKey` at once for items of one key (one driver) and at most
 * `total` at once overall — the bounds the healer controller keeps (per sidecar, per cluster).
 * Items of a key go in order; a free slot goes to the next key, round-robin. Any failure fails the run.
 */
export async function runBounded<T>(
  items: readonly T[],
  keyOf: (item: T) => string,
  bounds: { perKey: number; total: number },
  send: (item: T) => Promise<Outcome<unknown>>,
): Promise<{ wallMs: number }> {
  const queues = new Map<string, T[]>();
  for (const item of items) {
    const k = keyOf(item);
    if (!queues.has(k)) queues.set(k, []);
    queues.get(k)!.push(item);
  }
  const busy = new Map<string, number>([...queues.keys()].map((k) => [k, 0]));
  const keys = [...queues.keys()];
  let turn = 0;
  let inflight = 0;
  let failure: string | undefined;
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const pump = () => {
      while (failure === undefined && inflight < bounds.total) {
        const k = keys.map((_, d) => keys[(turn + d) % keys.length]!).find((key) => queues.get(key)!.length > 0 && busy.get(key)! < bounds.perKey);
        if (k === undefined) break;
        turn = (keys.indexOf(k) + 1) % keys.length;
        const item = queues.get(k)!.shift()!;
        busy.set(k, busy.get(k)! + 1);
        inflight++;
        void send(item).then((o) => {
          if (!o.ok) failure ??= `${k}: ${codeName(o.code)} ${o.details}`;
          busy.set(k, busy.get(k)! - 1);
          inflight--;
          pump();
        });
      }
      if (inflight === 0) resolve();
    };
    pump();
  });
  if (failure !== undefined) throw new Error(failure);
  return { wallMs: performance.now() - started };
}

// Concurrency as the driver saw it, from the call log's receipt and answer times.

/** Peak number of overlapping [t0, t1] intervals. */
export function peakOverlap(intervals: { t0: number; t1: number }[]): number {
  const events = intervals.flatMap((i) => [
    { t: i.t0, d: 1 },
    { t: i.t1, d: -1 },
  ]);
  events.sort((a, b) => a.t - b.t || a.d - b.d);
  let cur = 0;
  let peak = 0;
  for (const e of events) peak = Math.max(peak, (cur += e.d));
  return peak;
}

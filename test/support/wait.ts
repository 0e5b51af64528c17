// Condition polling with a deadline: the only way tests synchronise with processes.
//
// Every deadline a test waits with is scaled by TEST_TIME_SCALE (default 1): on a machine slower
// than the one the suite was written on, one knob lengthens every wait without changing what a
// test asserts. A deadline bounds how long a test may wait for something that should happen; it is
// never what a test checks, so raising it can only turn a hang into a later failure.

// The timers as they were when this module loaded: a test that mocks timers (t.mock.timers) still
// waits and times out on real ones.
const { setTimeout: realSetTimeout, clearTimeout: realClearTimeout } = globalThis;

/** TEST_TIME_SCALE, parsed once: a positive number. */
export const TIME_SCALE = parseScale(process.env["TEST_TIME_SCALE"]);

function parseScale(raw: string | undefined): number {
  if (raw === undefined || raw === "") return 1;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`TEST_TIME_SCALE=${raw}: a positive number, e.g. 2`);
  return n;
}

/** `ms` scaled by TEST_TIME_SCALE: the deadline of a wait. */
export const scaled = (ms: number): number => Math.round(ms * TIME_SCALE);

/** Thrown by a probe when waiting longer cannot help (the process died): ends the wait at once. */
export class StopWaiting extends Error {}
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  { timeoutMs = 15_000, intervalMs = 25 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const limit = scaled(timeoutMs);
  const deadline = Date.now() + limit;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== null && v !== false) return v;
    } catch (err) {
      if (err instanceof StopWaiting) throw err;
      lastError = err;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? `: last error ${lastError.message}` : "";
      throw new Error(`timed out after ${limit} ms waiting for ${what}${why}`);
    }
    await new Promise((r) => realSetTimeout(r, intervalMs));
  }
}

/**
 * `promise`, or a rejection naming `what` once `timeoutMs` (scaled) has passed: a test that awaits
 * work it started (a pass, a shutdown) fails at its deadline, saying what never ended, instead of
 * hanging until the runner's timeout. The timer is cleared either way, so it keeps nothing alive.
 */
export async function within<T>(what: string, promise: Promise<T>, timeoutMs = 10_000): Promise<T> {
  const limit = scaled(timeoutMs);
  let timer: ReturnType<typeof realSetTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = realSetTimeout(() => reject(new Error(`timed out after ${limit} ms waiting for ${what}`)), limit);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    realClearTimeout(timer);
  }
}

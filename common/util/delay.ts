/** A wait between retries: `delay`, or in tests a stand-in that records the waits. */
export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

/** Resolves after `ms`, or at once when `signal` aborts (never rejects: callers check the signal). */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}

/** Exponential backoff with a cap; `reset()` after a success. */
export class Backoff {
  private next: number;
  constructor(
    private readonly initialMs: number,
    private readonly capMs: number,
  ) {
    this.next = initialMs;
  }
  take(): number {
    const ms = this.next;
    this.next = Math.min(this.next * 2, this.capMs);
    return ms;
  }
  reset(): void {
    this.next = this.initialMs;
  }
}

// The loop of the relay's watched caches (the Node, this node's Pods): an attempt
// reads and then watches until the stream ends, and starts again; after a failure it waits first,
// 200 ms doubling to 10 s, back to 200 ms once a watch has delivered. Until the cache is closed.
import { Backoff, type Sleep } from "../../common/util/delay.js";

export interface WatchLoop {
  /** Aborted when the cache is closed: the loop ends, and the waits and watches with it. */
  signal: AbortSignal;
  sleep: Sleep;
  /** A read and the watch after it; `delivered()` on each event resets the backoff. */
  attempt(delivered: () => void): Promise<void>;
  /** A failed attempt, before the wait (never after the cache was closed). */
  failed(err: unknown): void;
}

export async function keepWatching(w: WatchLoop): Promise<void> {
  const backoff = new Backoff(200, 10_000);
  while (!w.signal.aborted) {
    try {
      await w.attempt(() => backoff.reset());
    } catch (err) {
      if (w.signal.aborted) return;
      w.failed(err);
      await w.sleep(backoff.take(), w.signal);
    }
  }
}

export const reasonOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

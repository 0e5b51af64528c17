// Identical concurrent requests share one execution. Each caller keeps its own cancellation and
// deadline; the shared work is cancelled only when every caller has gone.
import { cancelledBy } from "../errors.js";

interface Flight<T> {
  promise: Promise<T>;
  abort: AbortController;
  waiters: number;
}

export class SingleFlight<T> {
  private readonly flights = new Map<string, Flight<T>>();

  get size(): number {
    return this.flights.size;
  }

  do(key: string, signal: AbortSignal, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    // Gone already: no work started only to be cancelled.
    if (signal.aborted) return Promise.reject(cancelledBy(signal));
    let flight = this.flights.get(key);
    if (!flight) {
      const abort = new AbortController();
      const f: Flight<T> = { abort, waiters: 0, promise: undefined as never };
      f.promise = fn(abort.signal).finally(() => {
        if (this.flights.get(key) === f) this.flights.delete(key);
      });
      // The shared promise may settle after every caller left; nobody awaits it then.
      f.promise.catch(() => {});
      this.flights.set(key, f);
      flight = f;
    }
    const f = flight;
    f.waiters++;
    return new Promise<T>((resolve, reject) => {
      let left = false;
      const leave = () => {
        if (left) return;
        left = true;
        signal.removeEventListener("abort", onAbort);
        if (--f.waiters === 0) {
          f.abort.abort(signal.reason);
          if (this.flights.get(key) === f) this.flights.delete(key);
        }
      };
      const onAbort = () => {
        leave();
        reject(cancelledBy(signal));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      // Once settled, the caller's signal is no longer listened to, so it can never leave twice.
      f.promise.then(
        (v) => {
          if (left) return;
          signal.removeEventListener("abort", onAbort);
          f.waiters--;
          resolve(v);
        },
        (e: unknown) => {
          if (left) return;
          signal.removeEventListener("abort", onAbort);
          f.waiters--;
          reject(e);
        },
      );
    });
  }
}

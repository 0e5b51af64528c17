// At most `max` calls at once (driver calls; the reviews that verify callers), a bounded FIFO of
// waiters beyond that, and a clear RESOURCE_EXHAUSTED past it. A waiter that gives up (cancel, deadline) leaves the queue at once.
import { cancelledBy, resourceExhausted } from "../errors.js";

export class Limiter {
  private active = 0;
  private readonly waiters: { grant: () => void; fail: (e: unknown) => void }[] = [];

  constructor(
    private readonly max: number,
    private readonly maxQueue: number,
    /** What is limited, as the refusal names it. */
    private readonly what = "driver calls",
    private readonly slot = "a driver slot",
  ) {}

  get inflight(): number {
    return this.active;
  }

  async run<T>(fn: () => Promise<T>, signal: AbortSignal): Promise<T> {
    await this.acquire(signal);
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private acquire(signal: AbortSignal): Promise<void> {
    if (this.active < this.max) {
      this.active++;
      return Promise.resolve();
    }
    if (this.waiters.length >= this.maxQueue) {
      return Promise.reject(resourceExhausted(`too many ${this.what}: ${this.max} in flight and ${this.maxQueue} waiting; retry later`));
    }
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        },
        fail: reject,
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(cancelledBy(signal, `call cancelled while waiting for ${this.slot}`));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private release(): void {
    const next = this.waiters.shift();
    if (next) next.grant();
    else this.active--;
  }
}

// A delay that ends the moment its call dies, so a cancelled or expired call leaves no timer behind.

export class CallGoneError extends Error {
  constructor() {
    super("call cancelled or past its deadline");
    this.name = "CallGoneError";
  }
}

export function delay(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(new CallGoneError());
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(new CallGoneError());
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

// A stand-in for the wait between retries: records each wait asked for and keeps it pending until
// the test says wake(), so backoff sequences are checked without timing anything.
import type { Sleep } from "../../common/util/delay.js";

export function gatedSleep() {
  const waits: number[] = [];
  const pending: (() => void)[] = [];
  const sleep: Sleep = (ms, signal) => {
    waits.push(ms);
    return new Promise<void>((resolve) => {
      pending.push(resolve);
      signal.addEventListener("abort", () => resolve(), { once: true });
    });
  };
  /** Ends every wait in progress. */
  const wake = () => {
    for (const resolve of pending.splice(0)) resolve();
  };
  return { sleep, waits, wake };
}

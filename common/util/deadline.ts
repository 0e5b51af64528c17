// A signal for one operation: aborted after `ms` or when `parent` aborts, and released as soon as
// the operation settles. AbortSignal.timeout keeps its timer (and AbortSignal.any its links to the
// parent) until the timeout fires: made for each heal call with the 3 minute heal deadline, 50 000
// calls of a cluster-wide rollout held some 65 000 timers, signals and links at once, and the
// controller ran out of heap (the cluster bench).
export async function withDeadline<T>(ms: number, parent: AbortSignal | undefined, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new DOMException(`aborted due to timeout (${ms} ms)`, "TimeoutError")), ms);
  const onAbort = () => ac.abort(parent!.reason);
  if (parent?.aborted) ac.abort(parent.reason);
  else parent?.addEventListener("abort", onAbort, { once: true });
  try {
    return await fn(ac.signal);
  } finally {
    clearTimeout(timer);
    parent?.removeEventListener("abort", onAbort);
  }
}

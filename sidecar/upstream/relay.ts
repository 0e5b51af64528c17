// What every upstream method does around its own work: the driver must be ready and offer the
// capability (else UNAVAILABLE / UNIMPLEMENTED, the driver untouched), the work runs in a
// --max-inflight slot shared with healing, bounded by the call's deadline.
import type { DriverConnection, DriverInfo } from "../driver/connection.js";
import { deadlineExceeded, unavailable } from "../errors.js";
import type { KubeApi } from "../kube/api.js";
import type { Limiter } from "../relay/limiter.js";
import type { SecretCache } from "../relay/secret-cache.js";
import type { CallContext } from "../server/context.js";
import { requireCapability, type Need } from "./capabilities.js";
import { endedByDeadline, withDeadline } from "../util/deadline-signal.js";

export interface UpstreamDeps {
  driver: DriverConnection;
  limiter: Limiter;
  kube: KubeApi;
  secrets: SecretCache;
  stagingRoot: string;
}

export interface Work {
  driver: DriverInfo;
  /** Fires on cancellation or at the deadline: every Kubernetes read and driver call takes it. */
  signal: AbortSignal;
  deadline: number;
}

export async function relay<T>(deps: UpstreamDeps, ctx: CallContext, need: Need, work: (w: Work) => Promise<T>): Promise<T> {
  const driver = deps.driver.driver;
  if (!deps.driver.ready || !driver) throw unavailable("driver is not connected or not ready");
  requireCapability(driver, need);
  const deadline = ctx.deadline;
  let bounded: AbortSignal | undefined;
  try {
    return await withDeadline(ctx.signal, deadline, (signal) => {
      bounded = signal;
      return deps.limiter.run(() => work({ driver, signal, deadline }), signal);
    });
  } catch (err) {
    // The deadline timer can fire a few ms before Date.now() reaches the deadline (timers run on
    // the event loop's cached clock); the driver call it cut then answers CANCELLED. Either way the
    // caller's time ran out, and that is what it and the metrics must see.
    if (Date.now() >= deadline || endedByDeadline(bounded)) throw deadlineExceeded(`deadline exceeded while serving ${ctx.method}`);
    throw err;
  }
}

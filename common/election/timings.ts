// The rule client-go's leader elector enforces on its timings, checked once when flags are parsed
// (the controller's and the controller-plugin sidecar's --leader-election-* flags).
import { FlagError } from "../config/flags.js";

export interface LeaseTimings {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/** leaseDuration > renewDeadline > retryPeriod x 1.2, retryPeriod > 0; a FlagError names the flag. */
export function checkLeaseTimings(t: LeaseTimings): void {
  if (t.retryPeriodMs <= 0) throw new FlagError("leader-election-retry-period", "--leader-election-retry-period must be positive");
  if (t.renewDeadlineMs <= t.retryPeriodMs * 1.2) {
    throw new FlagError("leader-election-renew-deadline", "--leader-election-renew-deadline must be greater than 1.2 x --leader-election-retry-period");
  }
  if (t.leaseDurationMs <= t.renewDeadlineMs) {
    throw new FlagError("leader-election-lease-duration", "--leader-election-lease-duration must be greater than --leader-election-renew-deadline");
  }
}

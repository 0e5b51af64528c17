// Refusals on the controller port since the last time they were taken, by reason with the latest
// detail. The CSIAddonsNode manager quotes them when its object keeps being deleted: the upstream
// controller deletes the object after failing to connect, and a refusal here is the usual cause.
// Details are the status messages the caller was sent (never a token).
import type { RefusalReason } from "../metrics/metrics.js";

const MAX_DETAIL = 200;

export class RefusalTally {
  private readonly byReason = new Map<RefusalReason, { count: number; last: string }>();

  record(reason: RefusalReason, detail: string): void {
    const seen = this.byReason.get(reason);
    const last = detail.length > MAX_DETAIL ? `${detail.slice(0, MAX_DETAIL)}…` : detail;
    this.byReason.set(reason, { count: (seen?.count ?? 0) + 1, last });
  }

  /** "permission_denied ×3 (last: …); plaintext ×1 (last: …)", or undefined when none; counts anew after. */
  take(): string | undefined {
    const text = [...this.byReason].map(([reason, { count, last }]) => `${reason} ×${count} (last: ${last})`).join("; ");
    this.byReason.clear();
    return text || undefined;
  }
}

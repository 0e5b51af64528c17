// How long to wait before creating our CSIAddonsNode again after someone deleted it. The upstream
// csi-addons controller deletes the object when it fails to connect to the sidecar, and recreating
// it at once is what makes it try again; but when every try fails (it may not call us, TLS or the
// network stands in the way) that becomes a loop of a deletion and a creation many times a second,
// on every node. The first deletion is answered at once (an operator's, a restore); each one that
// follows before the object stood `survivedMs` waits twice as long as the last, up to `capMs`.

export interface PacerOptions {
  firstMs: number;
  capMs: number;
  /** An object that stood this long before its deletion ends the streak. */
  survivedMs: number;
}

export const DEFAULT_PACING: PacerOptions = { firstMs: 1_000, capMs: 5 * 60_000, survivedMs: 60_000 };

export class RecreationPacer {
  /** Deletions in a row of objects that did not survive. */
  private streak = 0;

  constructor(private readonly opts: PacerOptions = DEFAULT_PACING) {}

  /** Our object was deleted after standing `stoodMs`: the wait before creating it again. */
  deleted(stoodMs: number): { waitMs: number; inARow: number } {
    if (stoodMs >= this.opts.survivedMs) this.streak = 0;
    const waitMs = this.streak === 0 ? 0 : Math.min(this.opts.capMs, this.opts.firstMs * 2 ** (this.streak - 1));
    this.streak++;
    return { waitMs, inARow: this.streak };
  }
}

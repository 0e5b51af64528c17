// Rate-limited logging for lines that can repeat per call: the first line of a kind is written at
// once, identical ones in the following window are only counted, and one summary line (count, first
// and last time, the last one's fields) ends the window. A burst of 10,000 identical failures costs
// two lines, and no timer runs while nothing repeats.
import type { Logger } from "../../common/log/logger.js";

type Level = "error" | "warn" | "info" | "debug";

interface Pending {
  level: Level;
  message: string;
  count: number;
  first: Date;
  last: Date;
  fields: Record<string, unknown>;
}

export class RepeatedLines {
  private readonly pending = new Map<string, Pending>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly windowMs = 10_000,
    private readonly maxKinds = 256,
  ) {}

  /** `key` says which lines count as identical; it is never logged. */
  log(level: Level, key: string, message: string, fields: Record<string, unknown>): void {
    const seen = this.pending.get(key);
    if (seen) {
      seen.count++;
      seen.last = new Date();
      seen.fields = fields;
      return;
    }
    this.logger.log(level, message, fields);
    // Too many kinds at once to keep track of: each is simply written.
    if (this.pending.size >= this.maxKinds) return;
    const now = new Date();
    this.pending.set(key, { level, message, count: 0, first: now, last: now, fields });
    this.timer ??= setTimeout(() => this.flush(), this.windowMs).unref();
  }

  /** Writes the summaries now (the window ended, or the process is stopping). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const p of this.pending.values()) {
      if (p.count === 0) continue;
      this.logger.log(p.level, `${p.message} (repeated)`, { ...p.fields, repeated: p.count, first: p.first.toISOString(), last: p.last.toISOString() });
    }
    this.pending.clear();
  }
}

// Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it, shared by
// the controller (its replicas) and the sidecar (controller-plugin pods, the Lease the upstream
// csi-addons controller reads). Each program supplies a LeaseStore over its own Kubernetes access.
// - A candidate tries every (jittered) retry period; a holder renews every retry period and steps
//   down when it could not renew for the renew deadline.
// - Another holder's record counts as expired only once it has not changed for its lease duration
//   by the local clock: clocks of different nodes are never compared.
// - Writes carry the resourceVersion read, so two candidates never both win.
// - stop() releases a held Lease (holder "", duration 1 s), so a successor takes over at its next
//   try instead of after the lease duration (client-go's ReleaseOnCancel); also one taken by a
//   write whose answer came after stop().
import { EventEmitter } from "node:events";
import type { Logger } from "../log/logger.js";
import { delay } from "../util/delay.js";

/** The Lease's spec as the election uses it (times in ms since the epoch). */
export interface LeaseRecord {
  holder: string;
  renewTimeMs: number;
  durationMs: number;
  transitions: number;
  acquireTimeMs: number;
}

export interface StoredLease extends LeaseRecord {
  resourceVersion: string;
}

/** One Lease object; every call carries the caller's AbortSignal. */
export interface LeaseStore {
  read(signal: AbortSignal): Promise<StoredLease | undefined>;
  /** Creates (no resourceVersion) or replaces the Lease; false when another candidate wrote first (409). */
  write(record: LeaseRecord, resourceVersion: string | undefined, signal: AbortSignal): Promise<boolean>;
}

export interface LeaseElectorOptions {
  store: LeaseStore;
  logger: Logger;
  /** "<namespace>/<name>", for the log. */
  lease: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** The wait between tries; tests pass one that records. Default: a timer ended by the signal. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

const JITTER = 1.2;

export class LeaseElector extends EventEmitter<{ leading: [boolean] }> {
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  private leading = false;
  private failing = false;
  /** The last record seen, and when (local clock) it last changed. */
  private observed: { key: string; atMs: number } | undefined;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;

  constructor(private readonly opts: LeaseElectorOptions) {
    super();
    this.sleep = opts.sleep ?? delay;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.running ??= this.loop();
  }

  /** Stops trying; steps down and releases the Lease when held. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
    const held = this.leading;
    if (held) this.setLeading(false);
    // Also when this candidate never saw itself leading: a write that won may have been in flight
    // when stop() came, and its Lease would otherwise wait out its duration. release() writes only
    // a Lease that names this candidate (one read otherwise).
    if (this.running) await this.release(held);
  }

  private async loop(): Promise<void> {
    const { logger, lease, retryPeriodMs, renewDeadlineMs } = this.opts;
    const signal = this.stopping.signal;
    let lastRenewMs = 0;
    while (!signal.aborted) {
      const won = await this.tryAcquireOrRenew();
      if (signal.aborted) break;
      if (won) {
        lastRenewMs = Date.now();
        if (!this.leading) this.setLeading(true);
      } else if (this.leading && Date.now() - lastRenewMs > renewDeadlineMs) {
        logger.warn("could not renew the Lease within the renew deadline; no longer the leader", { lease });
        this.setLeading(false);
      }
      // Candidates spread their tries (client-go's JitterUntil) so they do not hit the API together.
      await this.sleep(this.leading ? retryPeriodMs : retryPeriodMs * (1 + Math.random() * (JITTER - 1)), signal);
    }
  }

  private setLeading(on: boolean): void {
    this.leading = on;
    this.emit("leading", on);
  }

  /** One client-go tryAcquireOrRenew: true when we hold the Lease afterwards. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const { store, identity, leaseDurationMs, renewDeadlineMs } = this.opts;
    const signal = AbortSignal.any([this.stopping.signal, AbortSignal.timeout(Math.max(1_000, renewDeadlineMs / 2))]);
    try {
      const now = Date.now();
      const next: LeaseRecord = { holder: identity, durationMs: leaseDurationMs, renewTimeMs: now, acquireTimeMs: now, transitions: 0 };
      const current = await store.read(signal);
      const won = await (async () => {
        if (!current) return store.write(next, undefined, signal);
        const key = `${current.holder}|${current.renewTimeMs}|${current.durationMs}`;
        if (this.observed?.key !== key) this.observed = { key, atMs: now };
        if (current.holder === identity) {
          return store.write({ ...next, acquireTimeMs: current.acquireTimeMs, transitions: current.transitions }, current.resourceVersion, signal);
        }
        const expired = current.holder === "" || now - this.observed.atMs > current.durationMs;
        return expired && store.write({ ...next, transitions: current.transitions + 1 }, current.resourceVersion, signal);
      })();
      this.failing = false;
      return won;
    } catch (err) {
      // Said once per outage; the retries in between only at debug.
      if (!this.stopping.signal.aborted) {
        this.opts.logger[this.failing ? "debug" : "warn"]("leader election: Lease request failed", { lease: this.opts.lease, error: (err as Error).message });
      }
      this.failing = true;
      return false;
    }
  }

  /** `held`: this candidate knew itself the leader, so a failure to release is worth a warning. */
  private async release(held: boolean): Promise<void> {
    const { store, logger, lease, identity } = this.opts;
    const signal = AbortSignal.timeout(5_000);
    try {
      const current = await store.read(signal);
      if (current?.holder !== identity) return;
      await store.write({ ...current, holder: "", durationMs: 1_000, renewTimeMs: Date.now() }, current.resourceVersion, signal);
      logger.info("released the Lease", { lease });
    } catch (err) {
      logger.log(held ? "warn" : "debug", "could not release the Lease; a successor takes over when it expires", { lease, error: (err as Error).message });
    }
  }
}

// Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it: try to
// acquire or renew every retryPeriod; a standby takes over only when the record it last saw has
// not changed for leaseDuration (measured on its own clock, so clocks need not agree); a leader
// that cannot renew within renewDeadline steps down. Writes use resourceVersion, so two
// candidates never both win. On shutdown the leader releases the Lease for a fast hand-over.
import { EventEmitter } from "node:events";
import type { Logger } from "../../common/log/logger.js";
import { delay } from "../../common/util/delay.js";
import type { LeaderElection } from "../config/config.js";
import type { KubeWrites, LeaseRecord } from "./api.js";

export interface ElectorEvents {
  started: [];
  stopped: [];
}

export class LeaderElector extends EventEmitter<ElectorEvents> {
  private leading = false;
  private lastRenewMs = 0;
  private observed: { record: string; atMs: number } | undefined;
  private readonly stop = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly kube: Pick<KubeWrites, "readLease" | "writeLease">,
    private readonly cfg: LeaderElection,
    private readonly logger: Logger,
  ) {
    super();
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Steps down and, when leading, releases the Lease. */
  async close(): Promise<void> {
    this.stop.abort();
    await this.loop;
    if (this.leading) {
      this.setLeading(false);
      await this.release().catch((err: unknown) => this.logger.warn("could not release the leader lease", { error: (err as Error).message }));
    }
  }

  private async run(): Promise<void> {
    const { retryPeriodMs, renewDeadlineMs } = this.cfg;
    while (!this.stop.signal.aborted) {
      let ok = false;
      try {
        ok = await this.tryAcquireOrRenew();
      } catch (err) {
        this.logger.warn("leader election: lease request failed", { error: (err as Error).message });
      }
      if (ok) {
        this.lastRenewMs = Date.now();
        if (!this.leading) this.setLeading(true);
      } else if (this.leading && Date.now() - this.lastRenewMs > renewDeadlineMs) {
        this.setLeading(false);
      }
      await delay(retryPeriodMs, this.stop.signal);
    }
  }

  private setLeading(v: boolean): void {
    this.leading = v;
    this.logger.info(v ? "became leader" : "stopped leading", { lease: `${this.cfg.namespace}/${this.cfg.name}`, identity: this.cfg.identity });
    this.emit(v ? "started" : "stopped");
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity, leaseDurationMs } = this.cfg;
    const signal = AbortSignal.any([this.stop.signal, AbortSignal.timeout(Math.max(1_000, this.cfg.renewDeadlineMs / 2))]);
    const now = Date.now();
    const current = await this.kube.readLease(namespace, name, signal);
    const next = { holder: identity, durationMs: leaseDurationMs, renewTimeMs: now, acquireTimeMs: now, transitions: 0 };
    if (!current) return this.kube.writeLease(namespace, name, next, undefined, signal);
    const record = `${current.holder}|${current.renewTimeMs}`;
    if (this.observed?.record !== record) this.observed = { record, atMs: now };
    if (current.holder === identity) {
      return this.kube.writeLease(namespace, name, { ...next, acquireTimeMs: current.acquireTimeMs, transitions: current.transitions }, current.resourceVersion, signal);
    }
    const expired = current.holder === "" || now - this.observed.atMs > Math.max(current.durationMs, 1_000);
    if (!expired) return false;
    return this.kube.writeLease(namespace, name, { ...next, transitions: current.transitions + 1 }, current.resourceVersion, signal);
  }

  private async release(): Promise<void> {
    const { namespace, name, identity } = this.cfg;
    const signal = AbortSignal.timeout(5_000);
    const current: LeaseRecord | undefined = await this.kube.readLease(namespace, name, signal);
    if (!current || current.holder !== identity) return;
    await this.kube.writeLease(namespace, name, { ...current, holder: "", durationMs: 1_000, renewTimeMs: Date.now() }, current.resourceVersion, signal);
  }
}

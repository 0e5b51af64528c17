// Takes part in a coordination.k8s.io Lease the way client-go's leader election does (which the
// upstream sidecar uses through csi-lib-utils), so upstream controllers and sidecars see the same
// record: holderIdentity = pod name, leaseDurationSeconds, acquireTime/renewTime (MicroTime),
// leaseTransitions. A candidate tries every retry period; a holder renews every retry period and
// lets go when it could not renew for the renew deadline; another holder's record counts as
// expired only once it has not changed for a lease duration by the local clock (clocks of
// different nodes are never compared). Writes carry the resourceVersion read, so two candidates
// never both win. stop() releases a held Lease (holder "", duration 1 s) so a successor takes over
// at its next try instead of after the lease duration, as client-go's ReleaseOnCancel does.
// Unlike the upstream sidecar, losing the Lease does not end the process: the sidecar goes on
// serving its node and becomes a candidate again.
import { EventEmitter } from "node:events";
import { KubeError, type KubeApi, type Lease } from "../kube/api.js";
import type { Logger } from "../log/logger.js";
import { delay } from "../util/delay.js";

export interface ElectorOptions {
  kube: KubeApi;
  logger: Logger;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

interface Events {
  leading: [boolean];
}

const JITTER = 1.2;
/** MicroTime as the API server writes it: RFC 3339 with six fractional digits. */
const microTime = (d: Date) => d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");

export class LeaseElector extends EventEmitter<Events> {
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  private leading = false;
  /** The last record seen, and when (local clock) it last changed. */
  private observed: { raw: string; lease: Lease; at: number } | undefined;

  constructor(private readonly opts: ElectorOptions) {
    super();
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.running ??= this.loop();
  }

  /** Stops trying; releases the Lease when held. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
    if (this.leading) await this.release();
  }

  private async loop(): Promise<void> {
    const { logger, namespace, name, identity, retryPeriodMs, renewDeadlineMs } = this.opts;
    const signal = this.stopping.signal;
    logger.info("taking part in the controller plugin's leader election", { lease: `${namespace}/${name}`, identity });
    let lastRenew = 0;
    while (!signal.aborted) {
      const won = await this.tryAcquireOrRenew();
      if (signal.aborted) break;
      if (won) {
        lastRenew = Date.now();
        if (!this.leading) this.setLeading(true);
      } else if (this.leading && Date.now() - lastRenew > renewDeadlineMs) {
        logger.warn("could not renew the Lease within the renew deadline; no longer the leader", { lease: `${namespace}/${name}` });
        this.setLeading(false);
      }
      // client-go: a holder renews every retry period; a candidate waits a jittered one.
      await delay(this.leading ? retryPeriodMs : retryPeriodMs * (1 + Math.random() * (JITTER - 1)), signal);
    }
  }

  private setLeading(on: boolean): void {
    this.leading = on;
    const { namespace, name } = this.opts;
    if (on) this.opts.logger.info("became the leader: receiving CONTROLLER_SERVICE requests", { lease: `${namespace}/${name}` });
    this.emit("leading", on);
  }

  /** One client-go tryAcquireOrRenew: true when we hold the Lease afterwards. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const { kube, namespace, name, identity, leaseDurationMs } = this.opts;
    const signal = AbortSignal.any([this.stopping.signal, AbortSignal.timeout(Math.max(this.opts.retryPeriodMs, 1000))]);
    const now = new Date();
    const spec = { holderIdentity: identity, leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000), acquireTime: microTime(now), renewTime: microTime(now) };
    try {
      const current = await kube.getLease(namespace, name, signal);
      if (!current) {
        const created = await kube.createLease({ apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name, namespace }, spec: { ...spec, leaseTransitions: 0 } }, signal);
        this.observe(created);
        return true;
      }
      this.observe(current);
      const holder = current.spec.holderIdentity ?? "";
      const held = holder === identity;
      const expired = Date.now() > this.observed!.at + (current.spec.leaseDurationSeconds ?? 0) * 1000;
      if (holder && !held && !expired) return false;
      const transitions = current.spec.leaseTransitions ?? 0;
      const next: Lease = {
        ...current,
        spec: held ? { ...spec, acquireTime: current.spec.acquireTime, leaseTransitions: transitions } : { ...spec, leaseTransitions: transitions + 1 },
      };
      this.observe(await kube.replaceLease(next, signal));
      return true;
    } catch (err) {
      // 409: someone else wrote first; anything else: try again next period. Either way not won now.
      if (!this.stopping.signal.aborted) this.opts.logger.debug("Lease not acquired or renewed", { lease: `${namespace}/${name}`, reason: explain(err) });
      return false;
    }
  }

  private observe(lease: Lease): void {
    const raw = JSON.stringify(lease.spec);
    if (this.observed?.raw !== raw) this.observed = { raw, lease, at: Date.now() };
    else this.observed.lease = lease;
  }

  private async release(): Promise<void> {
    const { kube, logger, namespace, name } = this.opts;
    const lease = this.observed?.lease;
    this.setLeading(false);
    if (!lease) return;
    const now = microTime(new Date());
    try {
      await kube.replaceLease(
        { ...lease, spec: { holderIdentity: "", leaseDurationSeconds: 1, acquireTime: now, renewTime: now, leaseTransitions: lease.spec.leaseTransitions ?? 0 } },
        AbortSignal.timeout(2_000),
      );
      logger.info("released the Lease", { lease: `${namespace}/${name}` });
    } catch (err) {
      logger.warn("could not release the Lease; a successor takes over when it expires", { lease: `${namespace}/${name}`, reason: explain(err) });
    }
  }
}

function explain(err: unknown): string {
  return err instanceof KubeError ? `${err.status} ${err.reason}: ${err.message}` : err instanceof Error ? err.message : String(err);
}

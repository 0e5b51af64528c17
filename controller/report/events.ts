// One Kubernetes Event per heal outcome (DESIGN 7.4): on the PV's bound claim, naming the PV as
// `related`, where the volume's users look (`kubectl describe pvc`, in their namespace); on the PV
// when it has no claim (one on each doubled a restart heal's writes). A repeat of the same event
// (same object, reason and message) bumps the count of the one already sent instead of flooding.
//
// Events are reports, and heals come first. They are written from a bounded backlog, one at a
// time as client-go's recorder does, so a restart heal of a thousand volumes never sends a thousand
// concurrent writes; and while heals run or wait, an Event waits too, up to MAX_DELAY_MS after it
// was queued, so the CPU of this process and the API server's attention go to the heals first.
// On the bench's 500-volume restart heal the heals took 2.04x the floor with every Event written at
// once against 1.91x one at a time (4 interleaved runs each), and 1.93x one at a time against 1.56x
// with Events also giving way to heals (4 more each). Only while more than SPARE_WRITERS_AT wait do
// more writers join, up to MAX_WRITERS: a rollout over 1000 nodes heals some 300 volumes a second,
// more than one writer's round trips carry, and one writer dropped Events in the cluster bench.
// Two writes of one Event (same key) never run at once, so a repeat stays behind the write it
// repeats and bumps that Event rather than racing it into a second one.
import type { Logger } from "../../common/log/logger.js";
import { delay } from "../../common/util/delay.js";
import { withDeadline } from "../../common/util/deadline.js";
import { KubeRequestError, type EventRecord, type KubeWrites } from "../kube/api.js";
import type { PvInfo, SidecarInfo } from "../plan/types.js";

/** Namespace of events about cluster-scoped objects (what kubectl describe pv looks in). */
const CLUSTER_EVENTS_NAMESPACE = "default";
/** Events sent, by what they say, so that a repeat bumps its Event: the most recent ones. */
const REMEMBERED = 4096;
/** A write the API server does not answer within this is given up (logged), so the backlog moves on. */
const WRITE_TIMEOUT_MS = 10_000;
/**
 * Events waiting to be written; past this, new ones are dropped (counted, logged), never a heal
 * slowed. A rollout over 1000 nodes queues some 300 a second, each held up to MAX_DELAY_MS while
 * heals run: 4096 overflowed in the cluster bench; 16384 holds a minute of that (a few MiB).
 */
const MAX_QUEUED_EVENTS = 16_384;
/** The longest an Event waits for heals to finish before it is written anyway. */
const MAX_DELAY_MS = 5_000;
/** Writers at most, and the backlog past which more than one writes. */
const MAX_WRITERS = 4;
const SPARE_WRITERS_AT = 64;

/** The heals Events give way to (the controller's work queue). */
export interface HealActivity {
  readonly busy: boolean;
  idle(): Promise<void>;
}

export interface EventRecorderOptions {
  heals?: HealActivity;
  maxDelayMs?: number;
  maxQueued?: number;
  writeTimeoutMs?: number;
  remembered?: number;
}

/** An Event waiting: its key says what it is (a repeat has the same), its namespace where it goes. */
interface Queued {
  record: EventRecord;
  key: string;
  namespace: string;
  queuedAt: number;
}

export class EventRecorder {
  private readonly sent = new Map<string, { namespace: string; name: string; count: number }>();
  private readonly queue: Queued[] = [];
  /** Keys being written now: a repeat waits for the write it repeats, so that it bumps that Event. */
  private readonly busy = new Set<string>();
  private readonly heals: HealActivity | undefined;
  private readonly maxDelayMs: number;
  private readonly maxQueued: number;
  private readonly writeTimeoutMs: number;
  private readonly remembered: number;
  private writers = 0;
  private droppedSinceWarned = 0;
  /** flush() callers, told when the backlog is empty. */
  private readonly drained: (() => void)[] = [];

  constructor(
    private readonly kube: Pick<KubeWrites, "createEvent" | "bumpEvent">,
    private readonly logger: Logger,
    private readonly metrics: { dropped: { inc(): void }; queued: { set(value: number): void } },
    opts: EventRecorderOptions = {},
  ) {
    this.heals = opts.heals;
    this.maxDelayMs = opts.maxDelayMs ?? MAX_DELAY_MS;
    this.maxQueued = opts.maxQueued ?? MAX_QUEUED_EVENTS;
    this.writeTimeoutMs = opts.writeTimeoutMs ?? WRITE_TIMEOUT_MS;
    this.remembered = opts.remembered ?? REMEMBERED;
  }

  /** Queues the event on the PV's claim, else on the PV. Never throws or waits: a lost event must not stop healing. */
  volume(pv: PvInfo, type: EventRecord["type"], reason: string, message: string): void {
    const onPv = { kind: "PersistentVolume", apiVersion: "v1", name: pv.name, uid: pv.uid } as const;
    if (!pv.claim) return this.enqueue({ involved: { ...onPv, namespace: undefined }, type, reason, message });
    const { namespace, name, uid } = pv.claim;
    this.enqueue({ involved: { kind: "PersistentVolumeClaim", apiVersion: "v1", namespace, name, uid }, related: onPv, type, reason, message });
  }

  /** Queues the event on a Pod. Never throws or waits. */
  pod(p: { namespace: string; name: string; uid: string }, type: EventRecord["type"], reason: string, message: string): void {
    this.enqueue({ involved: { kind: "Pod", apiVersion: "v1", namespace: p.namespace, name: p.name, uid: p.uid }, type, reason, message });
  }

  /** Queues the event on a sidecar's CSIAddonsNode. Never throws or waits. */
  sidecar(s: SidecarInfo, type: EventRecord["type"], reason: string, message: string): void {
    this.enqueue({
      involved: { kind: "CSIAddonsNode", apiVersion: "csiaddons.openshift.io/v1alpha1", namespace: s.namespace, name: s.name, uid: s.uid },
      type,
      reason,
      message,
    });
  }

  /** Resolves once every queued event is written (or given up), or after `timeoutMs`: for shutdown. */
  async flush(timeoutMs: number): Promise<void> {
    if (this.writers === 0) return;
    await atMost(new Promise<void>((resolve) => this.drained.push(resolve)), timeoutMs);
    if (this.writers > 0) this.logger.warn("events not written before shutdown", { events: this.queue.length + this.busy.size });
  }

  private enqueue(e: EventRecord): void {
    if (this.queue.length >= this.maxQueued) {
      this.metrics.dropped.inc();
      if (this.droppedSinceWarned++ === 0) {
        this.logger.warn("event backlog full; dropping new events until it drains", { queued: this.queue.length, reason: e.reason });
      }
      return;
    }
    if (this.droppedSinceWarned > 0) {
      this.logger.info("event backlog accepting again", { dropped: this.droppedSinceWarned });
      this.droppedSinceWarned = 0;
    }
    const namespace = e.involved.namespace ?? CLUSTER_EVENTS_NAMESPACE;
    const key = `${e.involved.kind}\0${namespace}\0${e.involved.name}\0${e.involved.uid}\0${e.reason}\0${e.message}`;
    this.queue.push({ record: e, key, namespace, queuedAt: Date.now() });
    this.metrics.queued.set(this.queue.length + this.busy.size);
    if (this.writers === 0 || (this.queue.length > SPARE_WRITERS_AT && this.writers < MAX_WRITERS)) void this.writeAll();
  }

  private async writeAll(): Promise<void> {
    this.writers++;
    for (let e = this.next(); e; e = this.next()) {
      try {
        await this.afterHeals(e.queuedAt);
        await withDeadline(this.writeTimeoutMs, undefined, (signal) => this.record(e, signal));
      } finally {
        this.busy.delete(e.key);
      }
      this.metrics.queued.set(this.queue.length + this.busy.size);
    }
    if (--this.writers === 0) for (const resolve of this.drained.splice(0)) resolve();
  }

  /** The oldest queued Event whose key no other writer is writing. */
  private next(): Queued | undefined {
    const i = this.queue.findIndex((q) => !this.busy.has(q.key));
    if (i < 0) return undefined;
    const [e] = this.queue.splice(i, 1);
    this.busy.add(e!.key);
    return e;
  }

  /** Waits while heals run or wait, but not past `maxDelayMs` after the Event was queued. */
  private async afterHeals(queuedAt: number): Promise<void> {
    const left = queuedAt + this.maxDelayMs - Date.now();
    if (this.heals?.busy && left > 0) await atMost(this.heals.idle(), left);
  }

  private async record({ record: e, key, namespace }: Queued, signal: AbortSignal): Promise<void> {
    try {
      const prev = this.sent.get(key);
      if (prev) {
        prev.count++;
        try {
          await this.kube.bumpEvent(prev.namespace, prev.name, prev.count, signal);
          return;
        } catch (err) {
          // Expired or deleted by the API server: start a new one. Any other failure (a refused
          // patch, an API server in trouble) is this write's, as in client-go's recorder: a new
          // Event for every repeat would flood the namespace and hide the refusal.
          if (!(err instanceof KubeRequestError && err.status === 404)) throw err;
        }
      }
      const name = await this.kube.createEvent(namespace, e, signal);
      this.remember(key, { namespace, name, count: 1 });
    } catch (err) {
      this.logger.warn("could not record event", { reason: e.reason, object: `${e.involved.kind}/${e.involved.name}`, error: (err as Error).message });
    }
  }

  private remember(key: string, v: { namespace: string; name: string; count: number }): void {
    this.sent.delete(key);
    this.sent.set(key, v);
    if (this.sent.size > this.remembered) this.sent.delete(this.sent.keys().next().value!);
  }
}

/** Waits for `p`, but no longer than `ms` (the timer is cleared either way). */
async function atMost(p: Promise<void>, ms: number): Promise<void> {
  const done = new AbortController();
  await Promise.race([p, delay(ms, done.signal)]);
  done.abort();
}

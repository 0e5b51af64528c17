// One pass over the volumes of one sidecar: wait until the sidecar is reachable and SERVING,
// check that its driver opted in (VolumeHealer capabilities), then one HealVolume per volume
// through the work queue, retried by status code with backoff and jitter. A volume that keeps
// failing is given up after maxAttempts, so that its pass ends (the marker is written, periodic
// checks resume and heal it later). Only a sidecar that is down or busy keeps a pass that must not
// lose a heal (restart, first sight) going: after each maxAttempts it waits for the sidecar again.
import { status } from "@grpc/grpc-js";
import type { Logger } from "../../common/log/logger.js";
import { delay, type Sleep } from "../../common/util/delay.js";
import { backoffMs, isRetryable } from "../plan/retry.js";
import { withVolumes } from "../plan/volumes.js";
import type { HealerCapabilities, Mode, PvInfo, SidecarInfo, Trigger } from "../plan/types.js";
import { canRun, reasonOf } from "../plan/trigger.js";
import type { Reporter } from "../report/reporter.js";
import { CallError } from "../../common/grpc/call-error.js";
import { KubeRequestError } from "../kube/api.js";
import type { SidecarConnection } from "../sidecars/connection.js";
import type { SidecarPool } from "../sidecars/pool.js";
import { EndpointRefusedError } from "../sidecars/verify.js";
import type { WorkQueue } from "./queue.js";

export interface RetryPolicy {
  maxAttempts: number;
  initialMs: number;
  maxMs: number;
  healTimeoutMs: number;
}

export interface PassDeps {
  queue: WorkQueue;
  pool: SidecarPool;
  /** The sidecar's latest CSIAddonsNode (its endpoint may change during a pass). */
  latest(key: string): SidecarInfo | undefined;
  reporter: Reporter;
  logger: Logger;
  retry: RetryPolicy;
  random?: () => number;
  /** The waits between attempts (tests record them instead of timing them). */
  sleep?: Sleep;
  /**
   * The sidecar's volumes that only the Pods on its node show (a driver without an attach step has
   * no VolumeAttachment, and a kubelet names only attachable volumes in status.volumesInUse): one
   * list of the node's Pods per pass, added to the pass's volumes before the first heal.
   */
  podVolumes?(sidecar: SidecarInfo, signal: AbortSignal): Promise<readonly PvInfo[]>;
  /**
   * Of these volumes, those staged by an older node-plugin pod than the sidecar's: in use on the node
   * (attached, or mounted by a Pod) since before the sidecar's pod started, so their user-space
   * mounts died with that older pod (DESIGN 7.2). Asked by a first sight only.
   */
  olderThanPod?(sidecar: SidecarInfo, pvs: readonly PvInfo[], signal: AbortSignal): Promise<ReadonlySet<string>>;
}

export interface PassSpec {
  sidecar: SidecarInfo;
  pvs: readonly PvInfo[];
  mode: Mode;
  trigger: Trigger;
  generation: number;
  /** 0 for restart work, 1 for the rest. */
  priority: number;
  /** The volumes olderThanPod names get ALWAYS, whatever `mode` says (a first sight). */
  olderAlways?: boolean;
}

export interface PassSummary {
  /** false when cancelled (superseded, leadership lost, sidecar gone). */
  completed: boolean;
  /** Set when the driver has not opted in: nothing was called. */
  skipped?: string;
  /** Set when a first sight could not check (the driver heals but has no health check): nothing was called. */
  unchecked?: string;
  /** Final answer per PV: a result (HEALED, NOT_NEEDED, NOT_HEALABLE) or a status code name. */
  answers: Map<string, string>;
  /** Volumes whose health after the answer was ABNORMAL. */
  abnormal: number;
}

const PROBE_TIMEOUT_MS = 5_000;
const POD_LIST_TIMEOUT_MS = 15_000;

export class HealPass {
  readonly done: Promise<PassSummary>;
  private resolveDone!: (s: PassSummary) => void;
  /** The pass ended: no more waiting, retries or new calls. */
  private readonly abort = new AbortController();
  /** Calls in flight are cancelled too (only cancel(); stop() lets them answer). */
  private readonly calls = new AbortController();
  private readonly answers = new Map<string, string>();
  private abnormal = 0;
  private conn: SidecarConnection | undefined;
  private ready: Promise<HealerCapabilities | undefined> | undefined;
  private finished = false;
  /** spec.pvs and what the node's Pods add (run()). */
  private volumes: readonly PvInfo[];
  private readonly sleep: Sleep;
  /** Volumes healed ALWAYS in a pass whose mode is IF_ABNORMAL (olderAlways). */
  private always: ReadonlySet<string> = new Set();
  readonly startedAt = Date.now();

  constructor(
    private readonly deps: PassDeps,
    readonly spec: PassSpec,
    private readonly onAnswer: (pv: string, answer: string) => void = () => {},
  ) {
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    this.volumes = spec.pvs;
    this.sleep = deps.sleep ?? delay;
  }

  get persistent(): boolean {
    return this.spec.trigger === "restart" || this.spec.trigger === "reconnect" || this.spec.trigger === "first-sight";
  }

  get answered(): number {
    return this.answers.size;
  }

  /** Volumes not answered yet (those the node's Pods add count once they are listed). */
  get unanswered(): number {
    return this.finished ? 0 : this.volumes.length - this.answers.size;
  }

  start(): this {
    void this.run();
    return this;
  }

  /** Ends the pass and cancels its calls in flight: what they would answer is no longer wanted. */
  cancel(): void {
    this.finish({ completed: false });
    this.calls.abort();
  }

  /** Ends the pass, but its calls in flight may still answer (and are reported) until cancel(). */
  stop(): void {
    this.finish({ completed: false });
  }

  private async run(): Promise<void> {
    // A restart heal lists the node's Pods while the sidecar is looked up, so that its first heal
    // does not wait for one more round trip; other passes list them only for a driver that opted in.
    const early = this.persistent ? this.withPodVolumes() : undefined;
    const caps = await this.waitReady();
    if (!caps) return;
    if (!canRun(this.spec.mode, caps)) {
      // Left unhandled, this sidecar's next restart would be a first sight again, never an ALWAYS heal.
      if (caps.healVolume && this.persistent) {
        return this.finish({ completed: true, unchecked: `driver ${this.spec.sidecar.driver} does not offer VolumeHealer GET_VOLUME_HEALTH` });
      }
      const need = this.spec.mode === "ALWAYS" ? "HEAL_VOLUME" : "HEAL_VOLUME and GET_VOLUME_HEALTH";
      return this.finish({ completed: true, skipped: `driver ${this.spec.sidecar.driver} does not offer VolumeHealer ${need}` });
    }
    this.volumes = await (early ?? this.withPodVolumes());
    if (this.abort.signal.aborted) return;
    if (this.volumes.length === 0) return this.finish({ completed: true });
    if (this.spec.olderAlways) this.always = await this.olderThanPod();
    if (this.abort.signal.aborted) return;
    for (const pv of this.volumes) this.enqueue(pv, 1, 0);
  }

  /**
   * spec.pvs plus the volumes the node's Pods show. A pass that must not lose a heal (restart, first
   * sight) lists again until the list works, unless it is refused (403: an install without the
   * permission, said in the log; the other volumes are healed all the same); any other pass goes on
   * without them and its successor tries again.
   */
  private async withPodVolumes(): Promise<readonly PvInfo[]> {
    const find = this.deps.podVolumes;
    const { sidecar, pvs, trigger } = this.spec;
    if (!find) return pvs;
    for (let attempt = 1; !this.abort.signal.aborted; attempt++) {
      try {
        return withVolumes(pvs, await find(sidecar, AbortSignal.any([this.abort.signal, AbortSignal.timeout(POD_LIST_TIMEOUT_MS)])));
      } catch (err) {
        if (this.abort.signal.aborted) break;
        const refused = err instanceof KubeRequestError && err.status === 403;
        const again = this.persistent && !refused;
        const wait = again ? backoffMs(attempt, this.deps.retry.initialMs, this.deps.retry.maxMs, this.deps.random) : undefined;
        this.deps.logger.warn("could not list the Pods on the sidecar's node", {
          sidecar: sidecar.key,
          node: sidecar.nodeId,
          trigger,
          error: (err as Error).message,
          retryInMs: wait,
        });
        if (wait === undefined) return pvs;
        await this.sleep(wait, this.abort.signal);
      }
    }
    return pvs;
  }

  /** What an older node-plugin pod staged; none when that cannot be told (a restart is never invented). */
  private async olderThanPod(): Promise<ReadonlySet<string>> {
    const find = this.deps.olderThanPod;
    if (!find) return new Set();
    const { sidecar } = this.spec;
    try {
      const older = await find(sidecar, this.volumes, AbortSignal.any([this.abort.signal, AbortSignal.timeout(POD_LIST_TIMEOUT_MS)]));
      if (older.size > 0)
        this.deps.logger.info("first sight: volumes staged by an older node-plugin pod get ALWAYS", {
          sidecar: sidecar.key,
          node: sidecar.nodeId,
          volumes: older.size,
          of: this.volumes.length,
        });
      return older;
    } catch (err) {
      if (!this.abort.signal.aborted)
        this.deps.logger.warn("could not tell which volumes an older node-plugin pod staged; checking them all", {
          sidecar: sidecar.key,
          error: (err as Error).message,
        });
      return new Set();
    }
  }

  /** `failures`: the volume's failed attempts so far that were not the sidecar being down or busy. */
  private enqueue(pv: PvInfo, attempt: number, failures: number): void {
    if (this.abort.signal.aborted) return;
    const { sidecar, priority, generation } = this.spec;
    this.deps.queue.add({ nodeKey: sidecar.key, priority, generation, run: () => this.attempt(pv, attempt, failures), dropped: () => {} });
  }

  private async attempt(pv: PvInfo, attempt: number, failures: number): Promise<void> {
    if (this.abort.signal.aborted) return;
    const conn = this.conn;
    // The sidecar is being looked up again: wait for it outside the queue, holding no slot.
    if (!conn) return void this.retryLater(pv, attempt, failures, 0, undefined);
    const { sidecar, trigger } = this.spec;
    const mode = this.always.has(pv.name) ? "ALWAYS" : this.spec.mode;
    const t0 = Date.now();
    const base = { sidecar, pv, trigger, mode, attempt };
    try {
      const a = await conn.heal(pv.name, mode, reasonOf(trigger, mode), this.deps.retry.healTimeoutMs, this.calls.signal);
      this.deps.reporter.outcome({ ...base, durationMs: Date.now() - t0, result: a.result, health: a.health, message: a.message, pods: a.pods });
      this.settle(pv.name, a.result, a.health === "ABNORMAL");
    } catch (err) {
      const code = err instanceof CallError ? err.code : status.INTERNAL;
      const result = status[code] ?? String(code);
      const message = err instanceof CallError ? err.details : (err as Error).message;
      const outcome = { ...base, durationMs: Date.now() - t0, result, message };
      if (this.calls.signal.aborted) {
        // This side gave the call up (superseded, not leading, sidecar gone, shutdown grace over): no answer about the volume.
        this.deps.logger.info("heal cancelled", {
          node: sidecar.nodeId,
          sidecar: sidecar.key,
          pv: pv.name,
          trigger,
          mode,
          attempt,
          result,
          duration: outcome.durationMs / 1000,
        });
        return;
      }
      if (!isRetryable(code) || this.abort.signal.aborted) {
        this.deps.reporter.outcome(outcome);
        return this.settle(pv.name, result, false);
      }
      const { maxAttempts, initialMs, maxMs } = this.deps.retry;
      const sidecarDown = code === status.UNAVAILABLE || code === status.RESOURCE_EXHAUSTED;
      const failed = failures + (sidecarDown ? 0 : 1);
      // A pass that must not lose a heal waits out a sidecar that is down or busy, but not a volume
      // that keeps failing: that would hold the pass (its marker, the node's periodic checks) forever.
      if (this.persistent ? failed >= maxAttempts : attempt >= maxAttempts) {
        this.deps.reporter.outcome(outcome);
        return this.settle(pv.name, result, false);
      }
      const inRound = ((attempt - 1) % maxAttempts) + 1;
      const wait = backoffMs(inRound, initialMs, maxMs, this.deps.random);
      this.deps.reporter.outcome({ ...outcome, retryInMs: wait });
      void this.retryLater(pv, attempt + 1, failed, wait, code === status.UNAVAILABLE || inRound >= maxAttempts ? conn : undefined);
    }
  }

  /** After `waitMs`, queues the attempt again; first looks the sidecar up again when `failed` was unreachable. */
  private async retryLater(pv: PvInfo, attempt: number, failures: number, waitMs: number, failed: SidecarConnection | undefined): Promise<void> {
    await this.sleep(waitMs, this.abort.signal);
    // An unreachable sidecar may have moved (new pod IP, new port). The first retry that finds
    // the failed connection still current starts a new lookup; the others join it.
    if (failed && this.conn === failed) {
      this.conn = undefined;
      this.ready = undefined;
    }
    if (!this.conn && !(await this.waitReady())) return;
    this.enqueue(pv, attempt, failures);
  }

  /** Resolves the sidecar and waits until it is SERVING; undefined when the pass ended meanwhile. */
  private waitReady(): Promise<HealerCapabilities | undefined> {
    this.ready ??= this.pollReady();
    return this.ready;
  }

  private async pollReady(): Promise<HealerCapabilities | undefined> {
    const { pool, logger, retry } = this.deps;
    const signal = this.abort.signal;
    for (let attempt = 1; !signal.aborted; attempt++) {
      const s = this.deps.latest(this.spec.sidecar.key);
      if (!s) {
        this.cancel();
        return undefined;
      }
      let why: string;
      // After each await: a pass that ended may be for a sidecar the pool has forgotten (deleted),
      // and a state set for it then would stay forever.
      try {
        const conn = await pool.resolve(s, signal);
        // Asked together, one round trip before the first heal instead of two; the capabilities
        // count only when the sidecar is SERVING (else its answer is not awaited, nor its failure).
        const asked = conn.capabilities(PROBE_TIMEOUT_MS);
        asked.catch(() => {});
        const health = await conn.health(PROBE_TIMEOUT_MS);
        if (signal.aborted) break;
        if (health.state === "serving") {
          const caps = await asked.catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
          if (signal.aborted) break;
          if (!(caps instanceof Error)) {
            pool.setState(s.key, "serving");
            this.conn = conn;
            return caps;
          }
          // Told apart from a sidecar not found: GetCapabilities is the first call that carries the
          // controller's token, so a token the sidecar refuses shows here, not as a network problem.
          pool.setState(s.key, "failing");
          why = `SERVING at ${conn.address}, but GetCapabilities failed: ${caps.message}`;
        } else {
          pool.setState(s.key, health.state);
          why = health.state === "not_serving" ? `${health.reason} at ${conn.address}` : `unreachable at ${conn.address}: ${health.reason}`;
        }
      } catch (err) {
        if (signal.aborted) break;
        // A refused endpoint is waited out like one not found: its own sidecar may yet write the
        // object right, and the restart it records must still be healed then.
        if (!(err instanceof EndpointRefusedError)) pool.setState(s.key, "unresolved");
        why = (err as Error).message;
      }
      const wait = backoffMs(attempt, retry.initialMs, retry.maxMs, this.deps.random);
      logger.info("waiting for sidecar", { sidecar: s.key, node: s.nodeId, trigger: this.spec.trigger, reason: why, attempt, retryInMs: wait });
      await this.sleep(wait, signal);
    }
    return undefined;
  }

  private settle(pv: string, answer: string, abnormal: boolean): void {
    if (this.finished || this.answers.has(pv)) return;
    this.answers.set(pv, answer);
    if (abnormal) this.abnormal++;
    this.onAnswer(pv, answer);
    if (this.answers.size === this.volumes.length) this.finish({ completed: true });
  }

  private finish(s: Omit<PassSummary, "answers" | "abnormal">): void {
    if (this.finished) return;
    this.finished = true;
    this.abort.abort();
    this.resolveDone({ ...s, answers: this.answers, abnormal: this.abnormal });
  }
}

// Keeps this sidecar's CSIAddonsNode in place: create, else update; retry conflicts; recreate it
// when deleted; wait out a pending deletion; replace it when immutable fields differ. The upstream
// controller deletes the object when it cannot reach us, and recreating it is what makes it retry;
// when that keeps happening, recreations slow down (recreation-pacer.ts) and a warning says why.
// Every third of the confirmation bound it re-reads its Pod (the controlling owner may have been
// recreated under the same name) and the object (an API server restored without it sends no
// watch event), so `presence` says "in place" only while the API keeps saying so.
import { KubeError, type CSIAddonsNode, type KubeApi } from "../kube/api.js";
import type { Logger } from "../../common/log/logger.js";
import { Backoff, delay } from "../../common/util/delay.js";
import {
  CARRIED_ANNOTATIONS,
  CREATED_BY_POD_UID,
  DRIVER_BOOT_ID,
  DRIVER_RECONNECTED_AT,
  DRIVER_RESTARTED_AT,
  desiredCSIAddonsNode,
  isAsWanted,
} from "./desired.js";
import { csiAddonsNodeName } from "./name.js";
import { resolvePodOwner, sameOwner, type PodOwner } from "./owner.js";
import { Presence } from "./presence.js";
import { RecreationPacer, type PacerOptions } from "./recreation-pacer.js";

/** Failed watches in a row (waits of 0.2 + 0.4 + 0.8 + 1.6 + 3.2 s between them) before starting over from a read. */
const WATCH_FAILURES_BEFORE_RESYNC = 6;

export interface NodeManagerOptions {
  kube: KubeApi;
  logger: Logger;
  namespace: string;
  pod: string;
  podUid: string;
  nodeId: string;
  endpoint: string;
  /** Readiness needs the API to have confirmed the object within this long; it is re-read every third of it. */
  confirmTimeoutMs: number;
  /** Deadline of each API request. */
  requestTimeoutMs?: number;
  /** Calls refused on the controller port since the last take(): the likely reason our object is deleted. */
  refusals?: { take(): string | undefined };
  /** Called each time the object is created again after a deletion. */
  onRecreated?: () => void;
  pacing?: PacerOptions;
}

const LIKELY_CAUSE =
  "the upstream csi-addons controller deletes a CSIAddonsNode after three failed connects to its sidecar: " +
  "it may not call this sidecar (PERMISSION_DENIED: bind deploy/components/upstream-controller-access), " +
  "its token is not accepted (UNAUTHENTICATED: --auth-audience), or it cannot reach the controller port " +
  "(no refusal counted: network policy, firewall, pod IP); someone else deleting it is the other cause";

export class CSIAddonsNodeManager {
  readonly presence: Presence;
  private driverName: string | undefined;
  /** Our restart annotations as this process set them. */
  private readonly own: Record<string, string> = {};
  /** CARRIED_ANNOTATIONS as the object last showed them (reads, watch events, our writes). */
  private carried: Record<string, string> = {};
  /** The resourceVersion `carried` was taken from. */
  private observedRv = 0;
  /** The driver's boot id was compared with the one the object kept (or there was no object). */
  private bootCompared = false;
  private owner: PodOwner | undefined;
  private name: string | undefined;
  /** Where the watch resumes: our last write or the last event or bookmark seen, whichever came last. */
  private watchRv: string | undefined;
  /** Wakes the watch loop once a resourceVersion to start from is known. */
  private rvKnown: (() => void) | undefined;
  private placed = false;
  private dirty = false;
  /** A reconcile is reading or writing the object: the periodic check then stays out of its way. */
  private reconciling = false;
  private wake: (() => void) | undefined;
  private readonly stop = new AbortController();
  /** Ends the current watch, so it restarts under a new name. */
  private watchStop = new AbortController();
  private started = false;
  /** Consecutive failed API requests, so an outage is logged when it starts and ends, not per retry. */
  private apiFailures = 0;
  /** When we last created or confirmed by a write the object now in place; undefined while none is. */
  private placedAt: number | undefined;
  private readonly pacer: RecreationPacer;

  constructor(private readonly opts: NodeManagerOptions) {
    this.presence = new Presence(() => `${opts.namespace}/${this.name ?? "(name not known yet)"}`, opts.confirmTimeoutMs);
    this.pacer = new RecreationPacer(opts.pacing);
  }

  /** Called whenever the driver (re)connects; the first call starts reconciling. */
  setDriver(name: string): void {
    if (name === this.driverName && this.placed) return;
    this.driverName = name;
    this.kick();
    if (!this.started) {
      this.started = true;
      void this.reconcileLoop();
      void this.watchLoop();
      void this.confirmLoop();
    }
  }

  /**
   * Called with every ready driver before setDriver. `restarted` and `reconnected` are what this
   * process saw (DriverConnection); a restart while this sidecar was down too is found by comparing
   * the boot id with the one the object kept, on the first read of it (reconcileOnce).
   */
  driverBooted(ev: { bootId: string | undefined; restarted: boolean; reconnected: boolean }, at = new Date()): void {
    if (ev.bootId !== undefined) this.own[DRIVER_BOOT_ID] = ev.bootId;
    if (ev.restarted) this.recordRestart("driver restarted (new boot id); recording it on the CSIAddonsNode", DRIVER_RESTARTED_AT, at, { bootId: ev.bootId });
    else if (ev.reconnected) {
      this.recordRestart("driver connection lost and back; the driver reports no boot id, so recording a possible restart", DRIVER_RECONNECTED_AT, at, {});
    }
  }

  private recordRestart(message: string, key: string, at: Date, fields: Record<string, unknown>): void {
    this.opts.logger.warn(message, { annotation: key, ...fields });
    this.own[key] = at.toISOString();
    this.kick();
  }

  /** Keeps what the object says about restarts, to write it again should the object be made anew. */
  private observe(obj: CSIAddonsNode): void {
    // A read answered after a newer watch event (the periodic check's, a reconcile's) must not
    // bring back what that event replaced. resourceVersions are opaque to clients, but every API
    // server in use hands out etcd's increasing revision; one that does not parse is taken as new.
    const rv = Number(obj.metadata.resourceVersion);
    if (Number.isSafeInteger(rv)) {
      if (rv < this.observedRv) return;
      this.observedRv = rv;
    }
    const a = obj.metadata.annotations ?? {};
    const carried: Record<string, string> = {};
    for (const k of CARRIED_ANNOTATIONS) if (a[k] !== undefined) carried[k] = a[k];
    if (JSON.stringify(carried) === JSON.stringify(this.carried)) return;
    this.carried = carried;
    this.opts.logger.debug("CSIAddonsNode restart annotations", { name: this.name, annotations: carried });
  }

  /** First read of the object by this process: a boot id other than the one it kept for this pod is a restart we did not see. */
  private compareBoot(existing: CSIAddonsNode | undefined): void {
    if (this.bootCompared) return;
    this.bootCompared = true;
    const a = existing?.metadata.annotations ?? {};
    const kept = a[DRIVER_BOOT_ID];
    const now = this.own[DRIVER_BOOT_ID];
    const samePod = a[CREATED_BY_POD_UID] === (this.opts.podUid || this.owner?.podUid);
    if (!samePod || kept === undefined || now === undefined || kept === now || this.own[DRIVER_RESTARTED_AT]) return;
    this.recordRestart(
      "driver restarted while this sidecar was down (boot id differs from the one on the CSIAddonsNode); recording it",
      DRIVER_RESTARTED_AT,
      new Date(),
      { was: kept, bootId: now },
    );
  }

  close(): void {
    this.stop.abort();
    this.presence.close();
    this.wake?.();
    this.rvKnown?.();
  }

  private resumeWatchAt(rv: string | undefined): void {
    this.watchRv = rv;
    this.rvKnown?.();
  }

  private kick(): void {
    this.dirty = true;
    this.wake?.();
  }

  private setPlaced(v: boolean, missing?: string): void {
    this.placed = v;
    if (v) this.presence.confirmed();
    else if (missing) this.presence.missing(missing);
  }

  private apiAnswered(): void {
    if (this.apiFailures > 0) this.opts.logger.info("the Kubernetes API answers again", { failedRequests: this.apiFailures });
    this.apiFailures = 0;
  }

  private apiFailed(what: string, err: unknown): void {
    const reason = explain(err);
    this.presence.failed(reason);
    // The first failure of an outage at warn; the retries only at debug.
    const level = this.apiFailures++ === 0 ? "warn" : "debug";
    this.opts.logger.log(level, what, { name: this.name, reason });
  }

  /** Reads the Pod's controlling owner; true when it (and so the object's name) changed. */
  private async resolveOwner(): Promise<boolean> {
    const owner = await resolvePodOwner(this.opts.kube, this.opts.namespace, this.opts.pod, this.signal());
    const previous = this.owner;
    if (previous && sameOwner(previous, owner)) return false;
    this.owner = owner;
    const name = csiAddonsNodeName(this.opts.nodeId, this.opts.namespace, owner.kind, owner.name);
    if (previous) {
      this.opts.logger.info("the pod's controlling owner changed; updating the CSIAddonsNode", {
        name,
        was: previous.ownerReference,
        now: owner.ownerReference,
      });
    }
    if (this.name !== undefined && name !== this.name) this.watchStop.abort();
    this.name = name;
    return previous !== undefined;
  }

  private signal(): AbortSignal {
    return AbortSignal.any([this.stop.signal, AbortSignal.timeout(this.opts.requestTimeoutMs ?? 10_000)]);
  }

  private async reconcileLoop(): Promise<void> {
    const backoff = new Backoff(200, 5_000);
    while (!this.stop.signal.aborted) {
      if (!this.dirty) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      this.dirty = false;
      this.reconciling = true;
      try {
        const done = await this.reconcileOnce().finally(() => (this.reconciling = false));
        this.apiAnswered();
        if (done) {
          backoff.reset();
          continue;
        }
        this.dirty = true;
        await delay(backoff.take(), this.stop.signal);
      } catch (err) {
        this.dirty = true;
        if (this.stop.signal.aborted) return;
        this.apiFailed("cannot put CSIAddonsNode in place; retrying", err);
        await delay(backoff.take(), this.stop.signal);
      }
    }
  }

  /** One step towards the desired object; false means "try again soon" (a conflict or a pending deletion). */
  private async reconcileOnce(): Promise<boolean> {
    const { kube, namespace } = this.opts;
    const fresh = !this.owner;
    if (fresh) await this.resolveOwner();
    const name = this.name!;
    const existing = await kube.getCSIAddonsNode(namespace, name, this.signal());
    this.compareBoot(existing);
    if (existing) this.observe(existing);
    if (!existing) {
      this.setPlaced(false, "not found");
      const recreating = this.placedAt !== undefined;
      if (recreating) await this.pauseBeforeRecreating(name);
      if (this.stop.signal.aborted) return false;
      // Created again: its owner may have been recreated under the same name (a new uid) while
      // this pod survived; the old uid would have the garbage collector delete it again.
      if (!fresh && (await this.resolveOwner()) && this.name !== name) return false;
      try {
        const created = await kube.createCSIAddonsNode(this.desired(undefined), this.signal());
        this.observe(created);
        this.resumeWatchAt(created.metadata.resourceVersion);
        this.opts.logger.info("created CSIAddonsNode", { name, namespace });
        this.setPlaced(true);
        this.placedAt = Date.now();
        // What is refused from now on is what the next deletion, if one comes, is quoted with.
        this.opts.refusals?.take();
        if (recreating) this.opts.onRecreated?.();
        return true;
      } catch (err) {
        if (err instanceof KubeError && err.status === 409) return false; // created meanwhile: update it
        throw err;
      }
    }
    if (existing.metadata.deletionTimestamp) {
      this.setPlaced(false, "being deleted");
      this.opts.logger.info("CSIAddonsNode is being deleted; waiting until it is gone", { name, finalizers: existing.metadata.finalizers });
      return false;
    }
    try {
      const replaced = await kube.replaceCSIAddonsNode(this.desired(existing), this.signal());
      this.observe(replaced);
      this.resumeWatchAt(replaced.metadata.resourceVersion);
      this.opts.logger.info("updated CSIAddonsNode", { name, namespace });
      this.setPlaced(true);
      this.placedAt ??= Date.now();
      return true;
    } catch (err) {
      if (!(err instanceof KubeError)) throw err;
      if (err.status === 409) return false;
      if (err.status === 404) return false;
      if (err.status === 422) {
        // Immutable fields (driver name, nodeID) differ: the object belongs to another driver or
        // node identity. Replace it; the uid precondition never removes a newer object.
        this.opts.logger.warn("CSIAddonsNode has immutable fields that differ; replacing it", { name, reason: err.message });
        this.setPlaced(false, "being replaced: immutable fields differ");
        this.placedAt = undefined; // our own deletion, not one to slow down for
        await kube.deleteCSIAddonsNode(namespace, name, existing.metadata.uid!, this.signal()).catch((e: unknown) => {
          if (!(e instanceof KubeError && (e.status === 404 || e.status === 409))) throw e;
        });
        return false;
      }
      throw err;
    }
  }

  /**
   * Our object is gone: counted once per object, and when deletions come in a row, waited out
   * before the creation with one warning that quotes the refusals the object saw.
   */
  private async pauseBeforeRecreating(name: string): Promise<void> {
    const stoodMs = Date.now() - this.placedAt!;
    this.placedAt = undefined;
    const { waitMs, inARow } = this.pacer.deleted(stoodMs);
    if (waitMs === 0) return;
    this.presence.missing(`deleted ${inARow} times in a row; creating it again in ${Math.round(waitMs / 1000)} s`);
    this.opts.logger.warn("CSIAddonsNode keeps being deleted; waiting before creating it again", {
      name,
      deletedInARow: inARow,
      stoodSeconds: Math.round(stoodMs / 100) / 10,
      waitSeconds: waitMs / 1000,
      refusedSinceCreated: this.opts.refusals?.take() ?? "none",
      likelyCause: LIKELY_CAUSE,
    });
    await delay(waitMs, this.stop.signal);
  }

  private desired(existing: CSIAddonsNode | undefined): CSIAddonsNode {
    const { namespace, podUid, endpoint, nodeId } = this.opts;
    return desiredCSIAddonsNode(
      { name: this.name!, namespace, owner: this.owner!, podUid, driverName: this.driverName!, endpoint, nodeId, own: this.own, carried: this.carried },
      existing,
    );
  }

  /**
   * Watches our object by name; any deletion (or pending deletion) triggers a reconcile. A watch
   * starts only from the resourceVersion of our own last write (or last event): started "now"
   * instead, it would miss a deletion that came between our write and its start, and the sidecar
   * would believe in an object that is gone.
   */
  private async watchLoop(): Promise<void> {
    const backoff = new Backoff(200, 5_000);
    let failed = 0;
    while (!this.stop.signal.aborted) {
      if (!this.name || !this.watchRv) {
        await new Promise<void>((resolve) => (this.rvKnown = resolve));
        this.rvKnown = undefined;
        continue;
      }
      this.watchStop = new AbortController();
      try {
        await this.opts.kube.watchCSIAddonsNode(this.opts.namespace)(
          { name: this.name, resourceVersion: this.watchRv, signal: AbortSignal.any([this.stop.signal, this.watchStop.signal]) },
          (type, obj) => {
            backoff.reset();
            failed = 0;
            // Bookmarks keep the resume point fresh on a quiet object, so a restarted watch is not 410 Gone.
            if (obj?.metadata?.resourceVersion) this.watchRv = obj.metadata.resourceVersion;
            if (type === "BOOKMARK") return;
            if (type !== "DELETED") this.observe(obj);
            if (type === "DELETED" || obj.metadata.deletionTimestamp || !this.matches(obj)) {
              if (type === "DELETED") this.opts.logger.warn("CSIAddonsNode was deleted; recreating it", { name: this.name });
              // Changed by someone else: not missing, just to be put right (the reconcile confirms it again).
              this.setPlaced(false, type === "DELETED" ? "deleted" : obj.metadata.deletionTimestamp ? "being deleted" : undefined);
              this.kick();
            } else if (!this.dirty) {
              this.presence.confirmed();
            }
          },
        );
      } catch (err) {
        if (this.stop.signal.aborted) return;
        failed++;
        if ((err instanceof KubeError && err.status === 410) || failed >= WATCH_FAILURES_BEFORE_RESYNC) {
          // Our resourceVersion is too old (410), or the watch keeps failing from it (e.g. one
          // newer than a restored API server's): start over from a fresh read (the reconcile's write).
          failed = 0;
          this.watchRv = undefined;
          this.kick();
        } else {
          // Resumed from the last resourceVersion seen, the watch replays what it missed; reading
          // and rewriting the object after every failed watch would add writes to an API server
          // already in trouble, on every node at once.
          this.opts.logger.debug("CSIAddonsNode watch ended with an error; restarting", { reason: explain(err) });
          await delay(backoff.take(), this.stop.signal);
        }
      }
    }
  }

  private matches(obj: CSIAddonsNode): boolean {
    return isAsWanted(obj, { driverName: this.driverName, endpoint: this.opts.endpoint, nodeId: this.opts.nodeId }, this.owner?.ownerReference.uid);
  }

  /** Re-reads the Pod's owner and the object every third of the bound, while nothing else is pending. */
  private async confirmLoop(): Promise<void> {
    const every = Math.max(1, Math.floor(this.opts.confirmTimeoutMs / 3));
    while (!this.stop.signal.aborted) {
      await delay(every, this.stop.signal);
      if (this.stop.signal.aborted || this.dirty || this.reconciling || !this.owner) continue;
      try {
        if (await this.resolveOwner()) {
          this.kick();
          continue;
        }
        const obj = await this.opts.kube.getCSIAddonsNode(this.opts.namespace, this.name!, this.signal());
        this.apiAnswered();
        if (obj) this.observe(obj);
        // What a reconcile that started meanwhile reads and writes is newer than what we read.
        if (this.dirty || this.reconciling) continue;
        if (!obj) {
          this.opts.logger.warn("CSIAddonsNode not found on a periodic check; creating it again", { name: this.name });
          this.setPlaced(false, "not found");
          this.kick();
        } else if (obj.metadata.deletionTimestamp || !this.matches(obj)) {
          this.kick();
        } else {
          this.presence.confirmed();
        }
      } catch (err) {
        if (this.stop.signal.aborted) return;
        this.apiFailed("cannot confirm the CSIAddonsNode with the Kubernetes API", err);
      }
    }
  }
}

function explain(err: unknown): string {
  if (err instanceof KubeError) {
    // What an API server answers for a resource type it does not serve.
    if (err.status === 404 && /could not find the requested resource/i.test(err.message)) {
      return `the CSIAddonsNode CRD (csiaddonsnodes.csiaddons.openshift.io) is not installed: ${err.message}`;
    }
    return `${err.status || "no answer"} ${err.reason}: ${err.message}`;
  }
  return err instanceof Error ? err.message : String(err);
}

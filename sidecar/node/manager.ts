// Keeps this sidecar's CSIAddonsNode in place: create, else update; retry conflicts; recreate it
// when deleted; wait out a pending deletion; replace it when immutable fields differ. The upstream
// controller deletes the object when it cannot reach us, and recreating it is what makes it retry.
import { EventEmitter } from "node:events";
import { KubeError, type CSIAddonsNode, type KubeApi } from "../kube/api.js";
import type { Logger } from "../log/logger.js";
import { Backoff, delay } from "../util/delay.js";
import { csiAddonsNodeName } from "./name.js";
import { resolvePodOwner, type PodOwner } from "./owner.js";

export const ANNOTATION_PREFIX = "sidecar.csiaddons.openshift.io/";
export const CREATED_BY_POD_UID = `${ANNOTATION_PREFIX}createdByPodUID`;
export const LAST_UPDATED_AT = `${ANNOTATION_PREFIX}lastUpdatedAt`;
export const DRIVER_RESTARTED_AT = `${ANNOTATION_PREFIX}driverRestartedAt`;

export interface NodeManagerOptions {
  kube: KubeApi;
  logger: Logger;
  namespace: string;
  pod: string;
  podUid: string;
  nodeId: string;
  endpoint: string;
  /** Deadline of each API request. */
  requestTimeoutMs?: number;
}

interface Events {
  change: [boolean];
}

export class CSIAddonsNodeManager extends EventEmitter<Events> {
  private driverName: string | undefined;
  private restartedAt: string | undefined;
  private owner: PodOwner | undefined;
  private name: string | undefined;
  /** Where the watch resumes: our last write or the last event or bookmark seen, whichever came last. */
  private watchRv: string | undefined;
  private placed = false;
  private dirty = false;
  private wake: (() => void) | undefined;
  private readonly stop = new AbortController();
  private started = false;

  constructor(private readonly opts: NodeManagerOptions) {
    super();
  }

  /** True while the object is known to exist with our spec and is not being deleted. */
  get inPlace(): boolean {
    return this.placed;
  }

  get objectName(): string | undefined {
    return this.name;
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
    }
  }

  recordDriverRestart(at: Date): void {
    this.restartedAt = at.toISOString();
    this.kick();
  }

  close(): void {
    this.stop.abort();
    this.wake?.();
  }

  private kick(): void {
    this.dirty = true;
    this.wake?.();
  }

  private setPlaced(v: boolean): void {
    if (v === this.placed) return;
    this.placed = v;
    this.emit("change", v);
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
      try {
        const done = await this.reconcileOnce();
        if (done) {
          backoff.reset();
          continue;
        }
        this.dirty = true;
        await delay(backoff.take(), this.stop.signal);
      } catch (err) {
        this.dirty = true;
        this.opts.logger.warn("cannot put CSIAddonsNode in place; retrying", { name: this.name, reason: explain(err) });
        await delay(backoff.take(), this.stop.signal);
      }
    }
  }

  /** One step towards the desired object; false means "try again soon" (a conflict or a pending deletion). */
  private async reconcileOnce(): Promise<boolean> {
    const { kube, namespace } = this.opts;
    if (!this.owner) {
      this.owner = await resolvePodOwner(kube, namespace, this.opts.pod, this.signal());
      this.name = csiAddonsNodeName(this.opts.nodeId, namespace, this.owner.kind, this.owner.name);
    }
    const name = this.name!;
    const existing = await kube.getCSIAddonsNode(namespace, name, this.signal());
    if (!existing) {
      try {
        this.watchRv = (await kube.createCSIAddonsNode(this.desired(undefined), this.signal())).metadata.resourceVersion;
        this.opts.logger.info("created CSIAddonsNode", { name, namespace });
        this.setPlaced(true);
        return true;
      } catch (err) {
        if (err instanceof KubeError && err.status === 409) return false; // created meanwhile: update it
        throw err;
      }
    }
    if (existing.metadata.deletionTimestamp) {
      this.setPlaced(false);
      this.opts.logger.info("CSIAddonsNode is being deleted; waiting until it is gone", { name, finalizers: existing.metadata.finalizers });
      return false;
    }
    try {
      this.watchRv = (await kube.replaceCSIAddonsNode(this.desired(existing), this.signal())).metadata.resourceVersion;
      this.opts.logger.info("updated CSIAddonsNode", { name, namespace });
      this.setPlaced(true);
      return true;
    } catch (err) {
      if (!(err instanceof KubeError)) throw err;
      if (err.status === 409) return false;
      if (err.status === 404) return false;
      if (err.status === 422) {
        // Immutable fields (driver name, nodeID) differ: the object belongs to another driver or
        // node identity. Replace it; the uid precondition never removes a newer object.
        this.opts.logger.warn("CSIAddonsNode has immutable fields that differ; replacing it", { name, reason: err.message });
        this.setPlaced(false);
        await kube.deleteCSIAddonsNode(namespace, name, existing.metadata.uid!, this.signal()).catch((e: unknown) => {
          if (!(e instanceof KubeError && (e.status === 404 || e.status === 409))) throw e;
        });
        return false;
      }
      throw err;
    }
  }

  private desired(existing: CSIAddonsNode | undefined): CSIAddonsNode {
    const owner = this.owner!;
    const meta = existing?.metadata ?? {};
    const annotations: Record<string, string> = {
      ...meta.annotations,
      [CREATED_BY_POD_UID]: this.opts.podUid || owner.podUid,
      [LAST_UPDATED_AT]: new Date().toISOString(),
    };
    if (this.restartedAt) annotations[DRIVER_RESTARTED_AT] = this.restartedAt;
    const others = (meta.ownerReferences ?? []).filter((o) => o.uid !== owner.ownerReference.uid);
    return {
      apiVersion: "csiaddons.openshift.io/v1alpha1",
      kind: "CSIAddonsNode",
      metadata: {
        ...meta,
        name: this.name!,
        namespace: this.opts.namespace,
        annotations,
        ownerReferences: [...others, owner.ownerReference],
      },
      spec: { driver: { name: this.driverName!, endpoint: this.opts.endpoint, nodeID: this.opts.nodeId } },
      ...(existing?.status ? { status: existing.status } : {}),
    };
  }

  /** Watches our object by name; any deletion (or pending deletion) triggers a reconcile. */
  private async watchLoop(): Promise<void> {
    const backoff = new Backoff(200, 5_000);
    while (!this.stop.signal.aborted) {
      if (!this.name) {
        await delay(100, this.stop.signal);
        continue;
      }
      try {
        await this.opts.kube.watchCSIAddonsNode(this.opts.namespace)(
          { name: this.name, resourceVersion: this.watchRv, signal: this.stop.signal },
          (type, obj) => {
            backoff.reset();
            // Bookmarks keep the resume point fresh on a quiet object, so a restarted watch is not 410 Gone.
            if (obj?.metadata?.resourceVersion) this.watchRv = obj.metadata.resourceVersion;
            if (type === "BOOKMARK") return;
            if (type === "DELETED" || obj.metadata.deletionTimestamp || !this.matches(obj)) {
              if (type === "DELETED") this.opts.logger.warn("CSIAddonsNode was deleted; recreating it", { name: this.name });
              this.setPlaced(false);
              this.kick();
            }
          },
        );
      } catch (err) {
        // 410 Gone: our resourceVersion is too old; start over from a fresh read.
        this.watchRv = undefined;
        this.kick();
        if (!(err instanceof KubeError && err.status === 410)) {
          this.opts.logger.debug("CSIAddonsNode watch ended with an error; restarting", { reason: explain(err) });
          await delay(backoff.take(), this.stop.signal);
        }
      }
    }
  }

  private matches(obj: CSIAddonsNode): boolean {
    const d = obj.spec?.driver;
    return d?.name === this.driverName && d?.nodeID === this.opts.nodeId && d?.endpoint === this.opts.endpoint;
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

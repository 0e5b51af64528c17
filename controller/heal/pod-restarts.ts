// Pods a heal left with a dead mount (the driver answered RESTART_NEEDED for their target),
// evicted when the operator asked for it (--restart-pods-not-healed-in-place): through the
// Eviction API, so PodDisruptionBudgets hold; a budget that allows no disruption now (429) is
// waited out with backoff, never bypassed. At most `perNode` evictions at once on a node and
// `total` in the cluster (the heals' own work queue, with these bounds). Each pod (by UID) at most
// once: a pod made again has a new UID and a mount of its own. A pod with no controller owner would
// not come back, and a pod or namespace annotated `restart-when-not-healed: "false"` asked to be
// left alone: both are only reported.
import type { Logger } from "../../common/log/logger.js";
import { delay, type Sleep } from "../../common/util/delay.js";
import type { KubeWrites } from "../kube/api.js";
import { backoffMs } from "../plan/retry.js";
import type { PodAnswer, PvInfo, SidecarInfo } from "../plan/types.js";
import type { EventRecorder } from "../report/events.js";
import { WorkQueue } from "./queue.js";

/** On a pod or its namespace, "false" keeps this controller from evicting the pod. */
export const RESTART_OPT_OUT = "healer.csiaddons.openshift.io/restart-when-not-healed";

const REQUEST_TIMEOUT_MS = 15_000;

export interface PodRestartOptions {
  perNode: number;
  total: number;
  /** Waits between attempts refused by a budget: doubled from the first, up to the last. */
  backoff: { initialMs: number; maxMs: number };
}

export type EvictionResult = "evicted" | "gone" | "delayed" | "skipped" | "failed";

export class PodRestarts {
  private readonly queue: WorkQueue;
  /** Pod UIDs already taken on (evicted, being evicted, or left alone): one eviction per pod. */
  private readonly seen = new Set<string>();
  private readonly stop = new AbortController();

  constructor(
    private readonly kube: Pick<KubeWrites, "podToRestart" | "namespaceAnnotations" | "evictPod">,
    private readonly events: Pick<EventRecorder, "pod">,
    private readonly logger: Logger,
    private readonly counted: (driver: string, result: EvictionResult) => void,
    private readonly opts: PodRestartOptions,
    private readonly sleep: Sleep = delay,
  ) {
    this.queue = new WorkQueue({ perNode: opts.perNode, global: opts.total });
  }

  /** Takes on a pod the driver said must be restarted; returns at once. */
  restartNeeded(sidecar: SidecarInfo, pv: PvInfo, pod: PodAnswer): void {
    if (this.stop.signal.aborted || !pod.uid || this.seen.has(pod.uid)) return;
    this.seen.add(pod.uid);
    this.enqueue(sidecar, pv, pod, 1);
  }

  /** Ends every wait; evictions in flight finish, nothing new starts. */
  close(): void {
    this.stop.abort();
  }

  private enqueue(sidecar: SidecarInfo, pv: PvInfo, pod: PodAnswer, attempt: number): void {
    this.queue.add({ nodeKey: sidecar.nodeId, priority: 0, generation: 0, run: () => this.attempt(sidecar, pv, pod, attempt), dropped: () => {} });
  }

  private async attempt(sidecar: SidecarInfo, pv: PvInfo, pod: PodAnswer, attempt: number): Promise<void> {
    if (this.stop.signal.aborted) return;
    const who = `${pod.namespace}/${pod.name}`;
    const fields = { node: sidecar.nodeId, driver: sidecar.driver, pv: pv.name, pod: who, pod_uid: pod.uid, attempt };
    const signal = AbortSignal.any([this.stop.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]);
    try {
      const found = await this.kube.podToRestart(pod.namespace, pod.name, signal);
      // Gone, made again, or moved: whatever replaced it mounted the volume afresh.
      if (!found || found.uid !== pod.uid || found.nodeName !== sidecar.nodeId) return this.done(sidecar, "gone", fields);
      const skip = !found.owners.some((o) => o.controller)
        ? "no controller owns it, so it would not come back"
        : found.annotations[RESTART_OPT_OUT] === "false"
          ? `the pod is annotated ${RESTART_OPT_OUT}: "false"`
          : (await this.kube.namespaceAnnotations(pod.namespace, signal))[RESTART_OPT_OUT] === "false"
            ? `its namespace is annotated ${RESTART_OPT_OUT}: "false"`
            : undefined;
      if (skip) {
        this.events.pod(pod, "Warning", "PodRestartSkipped", `not evicted to heal volume ${pv.name}: ${skip}; restart it to see the volume working`);
        this.logger.info("pod left with a dead mount, not evicted", { ...fields, reason: skip });
        return this.done(sidecar, "skipped", fields);
      }
      const r = await this.kube.evictPod(pod.namespace, pod.name, pod.uid, signal);
      if (r === "evicted") {
        this.events.pod(
          pod,
          "Normal",
          "PodEvicted",
          `evicted so that it starts again with a working mount of volume ${pv.name} (healed by ${sidecar.driver} on node ${sidecar.nodeId})`,
        );
        this.logger.info("pod evicted to heal its volume", fields);
        return this.done(sidecar, "evicted", fields);
      }
      if (r === "gone") return this.done(sidecar, "gone", fields);
      const wait = backoffMs(attempt, this.opts.backoff.initialMs, this.opts.backoff.maxMs);
      if (attempt === 1)
        this.events.pod(pod, "Warning", "PodEvictionDelayed", `eviction to heal volume ${pv.name} waits for its disruption budget: ${r.refused}`);
      this.logger.info("pod eviction waits for its disruption budget", { ...fields, reason: r.refused, retryInMs: wait });
      this.counted(sidecar.driver, "delayed");
      void this.sleep(wait, this.stop.signal).then(
        () => this.enqueue(sidecar, pv, pod, attempt + 1),
        () => {},
      );
    } catch (err) {
      if (this.stop.signal.aborted) return;
      const message = err instanceof Error ? err.message : String(err);
      this.logger.warn("pod eviction failed", { ...fields, reason: message });
      this.events.pod(pod, "Warning", "PodEvictionFailed", `could not evict it to heal volume ${pv.name}: ${message}`);
      this.done(sidecar, "failed", fields);
    }
  }

  private done(sidecar: SidecarInfo, result: EvictionResult, fields: Record<string, unknown>): void {
    if (result === "gone") this.logger.debug("pod to restart is gone already", fields);
    this.counted(sidecar.driver, result);
  }
}

// The PersistentVolumeClaims that Pods on this node use, kept by one watch of this node's Pods
// (fieldSelector spec.nodeName, as the kubelet itself watches them). It is how a volume of a driver
// without an attach step is found on this node: such a driver has no VolumeAttachment, and a
// kubelet lists only attachable volumes in the Node's status.volumesInUse
// (volumeManager.GetVolumesInUse keeps those whose plugin is attachable; CSI's CanAttach is false
// when the CSIDriver says attachRequired: false). The kubelet stages a claim for a Pod bound to its
// node, so a claim used here names a volume staged (or about to be, or just being unstaged) here.
// Saying "on this node" for one not staged yet or any more is harmless: the driver acts only on a
// volume staged on its node, and answers NOT_FOUND for any other.
//
// Only the claim keys are kept (a few per Pod, a few hundred Pods per node at most). An install
// whose RBAC predates this (no list/watch on Pods) loses only this way of step 4, and the log says
// what to grant: without list every claim is "not here", without watch every check lists.
// The watch starts at the first question (only a driver without attach asks), and every list is
// served from the API server's watch cache (resourceVersion=0), never a read from etcd.
import type { KubeApi, NodePod } from "../kube/api.js";
import { KubeError } from "../kube/api.js";
import type { Logger } from "../../common/log/logger.js";
import { delay, type Sleep } from "../../common/util/delay.js";
import { keepWatching, reasonOf } from "./keep-watching.js";
import { claimKey, claimsOfPod } from "../../common/kube/pod-claims.js";

const LIST_TIMEOUT_MS = 10_000;
const GRANT = "grant list and watch on pods: deploy/base/cluster-role.yaml";
const REFUSED = {
  list: `cannot list the Pods on this node: volumes of a driver without attach are not found (${GRANT})`,
  watch: `cannot watch the Pods on this node: each check of a volume without attach lists them (${GRANT})`,
};

const podKey = (pod: NodePod) => pod.metadata.uid ?? `${pod.metadata.namespace}/${pod.metadata.name}`;

export class PodClaims {
  /** Pod uid → its claim keys; and how many Pods use each claim. */
  private readonly byPod = new Map<string, string[]>();
  private readonly users = new Map<string, number>();
  private synced = false;
  /** What the API server refuses (403): without list every check says no, without watch every check lists. */
  private refused: "list" | "watch" | undefined;
  private readonly stop = new AbortController();
  private started = false;

  constructor(
    private readonly kube: KubeApi,
    private readonly nodeName: string,
    private readonly logger: Logger,
    /** The wait between watch attempts (tests see the backoff without timing it). */
    private readonly sleep: Sleep = delay,
  ) {}

  /** Starts the watch (once); the first uses() does it, so a driver that attaches never watches Pods. */
  start(): void {
    if (this.started || this.stop.signal.aborted) return;
    this.started = true;
    let step: "list" | "watch" = "list";
    void keepWatching({
      signal: this.stop.signal,
      sleep: this.sleep,
      attempt: async (delivered) => {
        step = "list";
        const list = await this.kube.listPodsOnNode(this.nodeName, AbortSignal.any([this.stop.signal, AbortSignal.timeout(LIST_TIMEOUT_MS)]));
        this.byPod.clear();
        this.users.clear();
        for (const p of list.items) this.set(p);
        this.synced = true;
        if (this.refused === "list") this.refused = undefined;
        step = "watch";
        // When the watch ends the Pods are listed again: a node's few hundred at most.
        await this.kube.watchPodsOnNode({ nodeName: this.nodeName, resourceVersion: list.resourceVersion, signal: this.stop.signal }, (type, pod) => {
          delivered();
          this.refused = undefined;
          if (type === "DELETED") this.remove(pod);
          else if (type === "ADDED" || type === "MODIFIED") this.set(pod);
        });
      },
      failed: (err) => {
        this.synced = false;
        const reason = reasonOf(err);
        if (err instanceof KubeError && err.status === 403) {
          if (this.refused !== step) this.logger.warn(REFUSED[step], { node: this.nodeName, reason });
          this.refused = step;
        } else {
          this.logger.debug("Pod watch ended; restarting", { node: this.nodeName, reason });
        }
      },
    });
  }

  close(): void {
    this.stop.abort();
  }

  /**
   * Does a Pod on this node use claim `namespace/name`? From the watch once it stands; before, one
   * list of this node's Pods. A list that fails says "no": this is one of several ways to find a
   * volume here, and the others must still answer.
   */
  async uses(namespace: string, name: string, signal: AbortSignal): Promise<boolean> {
    const key = claimKey(namespace, name);
    if (this.synced) return this.users.has(key);
    this.start();
    if (this.refused === "list" || this.stop.signal.aborted) return false;
    try {
      const list = await this.kube.listPodsOnNode(this.nodeName, AbortSignal.any([signal, AbortSignal.timeout(LIST_TIMEOUT_MS)]));
      return list.items.some((p) => claimsOfPod(p).includes(key));
    } catch (err) {
      if (signal.aborted) throw err;
      this.logger.debug("could not list this node's Pods", { node: this.nodeName, reason: reasonOf(err) });
      return false;
    }
  }

  private set(pod: NodePod): void {
    this.remove(pod);
    const uid = podKey(pod);
    const claims = claimsOfPod(pod);
    if (claims.length === 0) return;
    this.byPod.set(uid, claims);
    for (const c of claims) this.users.set(c, (this.users.get(c) ?? 0) + 1);
  }

  private remove(pod: NodePod): void {
    const uid = podKey(pod);
    for (const c of this.byPod.get(uid) ?? []) {
      // Every claim of a Pod in byPod is counted in users (set() and the relist keep them together).
      const n = this.users.get(c)! - 1;
      if (n > 0) this.users.set(c, n);
      else this.users.delete(c);
    }
    this.byPod.delete(uid);
  }
}

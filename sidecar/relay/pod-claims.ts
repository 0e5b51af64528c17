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
// The same Pods name a heal's publish targets: which Pods use the volume here, and how (read-only,
// mount propagation). Kept per Pod: its identity and its claims (a few per Pod, a few hundred Pods
// per node at most). An install
// whose RBAC predates this (no list/watch on Pods) loses only this way of step 4, and the log says
// what to grant: without list every claim is "not here", without watch every check lists.
// The watch starts at the first question (only a driver without attach asks), and every list is
// served from the API server's watch cache (resourceVersion=0), never a read from etcd.
import type { KubeApi, NodePod } from "../kube/api.js";
import { KubeError } from "../kube/api.js";
import type { Logger } from "../../common/log/logger.js";
import { delay, type Sleep } from "../../common/util/delay.js";
import { keepWatching, reasonOf } from "./keep-watching.js";
import { claimKey, claimUsesOfPod, weakerPropagation, type ClaimUse, type Propagation } from "../../common/kube/pod-claims.js";

const LIST_TIMEOUT_MS = 10_000;
const GRANT = "grant list and watch on pods: deploy/base/cluster-role.yaml";
const REFUSED = {
  list: `cannot list the Pods on this node: volumes of a driver without attach are not found (${GRANT})`,
  watch: `cannot watch the Pods on this node: each check of a volume without attach lists them (${GRANT})`,
};

const podKey = (pod: NodePod) => pod.metadata.uid ?? `${pod.metadata.namespace}/${pod.metadata.name}`;

/** One Pod on this node that uses a claim, and how. */
export interface ClaimUser {
  namespace: string;
  name: string;
  /** metadata.uid ("" when the API gave none: no target path can be made for it). */
  uid: string;
  readOnly: boolean;
  propagation: Propagation;
}

export class PodClaims {
  /** Pod key → its uses of claims; and the Pods (by key) that use each claim. */
  private readonly byPod = new Map<string, PodEntry>();
  private readonly users = new Map<string, Set<string>>();
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
    if (this.synced) return this.users.has(claimKey(namespace, name));
    return (await this.usersOf(namespace, name, signal)).length > 0;
  }

  /**
   * The Pods on this node that use claim `namespace/name` (as uses() finds them), sorted by
   * namespace and name; none when the Pods cannot be listed.
   */
  async usersOf(namespace: string, name: string, signal: AbortSignal): Promise<ClaimUser[]> {
    const key = claimKey(namespace, name);
    if (this.synced) return sorted([...(this.users.get(key) ?? [])].map((k) => userOf(this.byPod.get(k)!, key)));
    this.start();
    if (this.refused === "list" || this.stop.signal.aborted) return [];
    try {
      const list = await this.kube.listPodsOnNode(this.nodeName, AbortSignal.any([signal, AbortSignal.timeout(LIST_TIMEOUT_MS)]));
      return sorted(
        list.items
          .map(entryOf)
          .filter((e) => e.uses.some((u) => u.claim === key))
          .map((e) => userOf(e, key)),
      );
    } catch (err) {
      if (signal.aborted) throw err;
      this.logger.debug("could not list this node's Pods", { node: this.nodeName, reason: reasonOf(err) });
      return [];
    }
  }

  private set(pod: NodePod): void {
    this.remove(pod);
    const entry = entryOf(pod);
    if (entry.uses.length === 0) return;
    const key = podKey(pod);
    this.byPod.set(key, entry);
    for (const { claim: c } of entry.uses) {
      const set = this.users.get(c) ?? new Set<string>();
      set.add(key);
      this.users.set(c, set);
    }
  }

  private remove(pod: NodePod): void {
    const key = podKey(pod);
    for (const { claim: c } of this.byPod.get(key)?.uses ?? []) {
      const set = this.users.get(c);
      set?.delete(key);
      if (set?.size === 0) this.users.delete(c);
    }
    this.byPod.delete(key);
  }
}

/** What is kept of one Pod: who it is and the claims it uses. */
interface PodEntry {
  namespace: string;
  name: string;
  uid: string;
  uses: ClaimUse[];
}

function entryOf(pod: NodePod): PodEntry {
  const m = pod.metadata;
  return { namespace: m.namespace ?? "", name: m.name ?? "", uid: m.uid ?? "", uses: claimUsesOfPod(pod) };
}

/** The Pod as a user of `claim` (which it uses): two volumes of one claim are one publish target, mounted as the weaker of the two. */
function userOf(entry: PodEntry, claim: string): ClaimUser {
  const uses = entry.uses.filter((u) => u.claim === claim);
  return {
    namespace: entry.namespace,
    name: entry.name,
    uid: entry.uid,
    readOnly: uses[0]!.readOnly,
    propagation: uses.map((u) => u.propagation).reduce(weakerPropagation),
  };
}

const sorted = (users: ClaimUser[]) => users.sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));

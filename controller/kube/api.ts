// The controller's narrow view of Kubernetes: what the rest of the controller may read and write.
// Only kube/ implements it (and only kube/ imports @kubernetes/client-node).
import type { EventEmitter } from "node:events";
import type { LeaseRecord, StoredLease } from "../../common/election/lease-elector.js";
import type { OwnerRef, PvInfo, SidecarInfo, SidecarPod } from "../plan/types.js";

export interface ClusterEvents {
  sidecar: [type: "add" | "update" | "delete", sidecar: SidecarInfo];
}

/** Informer caches: reading them costs no API request. */
export interface ClusterView extends EventEmitter<ClusterEvents> {
  sidecars(): SidecarInfo[];
  sidecar(key: string): SidecarInfo | undefined;
  volumesOf(sidecar: SidecarInfo): PvInfo[];
  /** The sidecar's driver's PVs bound to these claims ("namespace/name"), none being deleted. */
  volumesOfClaims(sidecar: SidecarInfo, claims: Iterable<string>): PvInfo[];
  pv(name: string): PvInfo | undefined;
  /** PV name → when its VolumeAttachment to the sidecar's node was created (ms since the epoch). */
  attachedSince(sidecar: SidecarInfo): Map<string, number>;
}

export interface EventRecord {
  /** The object the event is about. */
  involved:
    | { kind: "PersistentVolume" | "PersistentVolumeClaim" | "Pod"; namespace: string | undefined; name: string; uid: string | undefined; apiVersion: "v1" }
    | { kind: "CSIAddonsNode"; namespace: string; name: string; uid: string; apiVersion: "csiaddons.openshift.io/v1alpha1" };
  /** The PV, when the event is on its claim (the Event's `related`). */
  related?: { kind: "PersistentVolume"; name: string; uid: string | undefined; apiVersion: "v1" };
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

/** The Lease as the shared elector (common/election) reads it. */
export type { LeaseRecord, StoredLease };

export interface KubeWrites {
  /** Merge patch of one annotation of a CSIAddonsNode; nothing else of the object is sent. */
  patchCSIAddonsNodeAnnotation(namespace: string, name: string, key: string, value: string, signal: AbortSignal): Promise<void>;
  /** What verifies a sidecar's pod, and its IP (one GET of the Pod). */
  sidecarPod(namespace: string, name: string, signal: AbortSignal): Promise<SidecarPod>;
  /** status.startTime of one Pod (one GET; ms since the epoch), undefined when it has none. */
  podStartTime(namespace: string, name: string, signal: AbortSignal): Promise<number | undefined>;
  /**
   * Every PVC ("namespace/claim") that the running Pods of one node use, with the earliest start of
   * a Pod using it: one list, fieldSelector spec.nodeName, resourceVersion=0 (the API server's watch
   * cache, not a read from etcd).
   */
  claimsOnNode(nodeName: string, signal: AbortSignal): Promise<NodeClaim[]>;
  /** The CSIDriver's spec.attachRequired: true when it says so or does not exist (as the kubelet reads it). */
  attachRequired(driver: string, signal: AbortSignal): Promise<boolean>;
  /** What decides whether a pod left with a dead mount may be evicted (one GET); undefined when it is gone. */
  podToRestart(namespace: string, name: string, signal: AbortSignal): Promise<PodToRestart | undefined>;
  /** A namespace's annotations (one GET); {} when it is gone. */
  namespaceAnnotations(namespace: string, signal: AbortSignal): Promise<Record<string, string>>;
  /**
   * Evicts the pod of this UID through the Eviction API (policy/v1), so its PodDisruptionBudget
   * holds: "evicted"; "gone" when no pod of that UID is there any more; `refused` with the API's
   * reason when its budget allows no disruption now (429).
   */
  evictPod(namespace: string, name: string, uid: string, signal: AbortSignal): Promise<"evicted" | "gone" | { refused: string }>;
  /** Creates an Event; returns its name so a repeat can bump it. */
  createEvent(namespace: string, e: EventRecord, signal: AbortSignal): Promise<string>;
  /** A repeat of an Event: count and lastTimestamp only. */
  bumpEvent(namespace: string, name: string, count: number, signal: AbortSignal): Promise<void>;
  /**
   * A token for the ServiceAccount namespace/name (TokenRequest), bound to `audiences`, with the
   * expiry the API server granted (it may be shorter than asked).
   */
  requestToken(namespace: string, name: string, audiences: string[], expirationSeconds: number, signal: AbortSignal): Promise<IssuedToken>;
  readLease(namespace: string, name: string, signal: AbortSignal): Promise<StoredLease | undefined>;
  /** false when another replica wrote first (409). */
  writeLease(namespace: string, name: string, lease: LeaseRecord, resourceVersion: string | undefined, signal: AbortSignal): Promise<boolean>;
}

export interface PodToRestart {
  uid: string;
  nodeName: string;
  owners: readonly OwnerRef[];
  annotations: Readonly<Record<string, string>>;
}

export interface NodeClaim {
  claim: string;
  /** The earliest status.startTime of a Pod of the node using it (ms since the epoch). */
  since: number | undefined;
}

export interface IssuedToken {
  token: string;
  expiresAtMs: number;
}

/** Kubernetes API status of a failed request (0 when it never got an answer). */
export class KubeRequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "KubeRequestError";
  }
}

// The narrow view of the Kubernetes API the sidecar needs. Only kube/client.ts implements it (over
// kube/transport.ts); everything else, the relay included, sees just this and never HTTP.
import type { PodVolumes } from "../../common/kube/pod-claims.js";

/** A failed API request: `status` is the HTTP status (0 when the server could not be reached). */
export class KubeError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = "KubeError";
  }
}

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  deletionTimestamp?: string;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface CSIAddonsNode {
  apiVersion: "csiaddons.openshift.io/v1alpha1";
  kind: "CSIAddonsNode";
  metadata: ObjectMeta;
  spec: { driver: { name: string; endpoint: string; nodeID: string } };
  status?: Record<string, unknown>;
}

export interface PodInfo {
  metadata: ObjectMeta;
}

export interface PersistentVolume {
  metadata: ObjectMeta;
  spec: {
    accessModes?: string[];
    mountOptions?: string[];
    volumeMode?: string;
    csi?: {
      driver: string;
      volumeHandle: string;
      fsType?: string;
      volumeAttributes?: Record<string, string>;
      nodeStageSecretRef?: { name: string; namespace: string };
    };
    /** The claim the PV is bound to (or reserved for). */
    claimRef?: { namespace?: string; name?: string };
  };
  status?: { phase?: string };
}

/** A Pod on this node, as far as its volumes go. */
export interface NodePod extends PodVolumes {
  metadata: ObjectMeta;
}

export interface VolumeAttachment {
  metadata: ObjectMeta;
  spec: { attacher: string; nodeName: string; source: { persistentVolumeName?: string } };
  status?: { attached: boolean; attachmentMetadata?: Record<string, string> };
}

/** storage.k8s.io/v1 CSIDriver, as far as staging goes. */
export interface CsiDriverInfo {
  metadata: ObjectMeta;
  /** The API server defaults an unset attachRequired to true. */
  spec: { attachRequired?: boolean };
}

export interface NodeInfo {
  metadata: ObjectMeta;
  status?: { volumesInUse?: string[] };
}

/** coordination.k8s.io/v1 Lease, as client-go's leader election writes it. */
export interface Lease {
  apiVersion: "coordination.k8s.io/v1";
  kind: "Lease";
  metadata: ObjectMeta;
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    /** MicroTime: RFC 3339 with microseconds. */
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

export interface WatchOptions {
  /** Only the object of this name. */
  name: string;
  resourceVersion?: string;
  signal: AbortSignal;
}

/** Delivers events until the stream ends; resolves then (or rejects with a KubeError). */
export type Watcher<T> = (opts: WatchOptions, onEvent: (type: WatchEventType, obj: T) => void) => Promise<void>;

export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
  /** The authenticator's extra (a bound token's pod and node, a scoped token's scopes): passed on to the SubjectAccessReview. */
  extra?: Record<string, string[]>;
}

export interface KubeApi {
  getPod(namespace: string, name: string, signal: AbortSignal): Promise<PodInfo>;
  getReplicaSet(namespace: string, name: string, signal: AbortSignal): Promise<PodInfo>;

  getCSIAddonsNode(namespace: string, name: string, signal: AbortSignal): Promise<CSIAddonsNode | undefined>;
  createCSIAddonsNode(obj: CSIAddonsNode, signal: AbortSignal): Promise<CSIAddonsNode>;
  replaceCSIAddonsNode(obj: CSIAddonsNode, signal: AbortSignal): Promise<CSIAddonsNode>;
  /** Deletes only the object with this uid (a precondition), so a newer object is never removed. */
  deleteCSIAddonsNode(namespace: string, name: string, uid: string, signal: AbortSignal): Promise<void>;
  watchCSIAddonsNode(namespace: string): Watcher<CSIAddonsNode>;

  getPersistentVolume(name: string, signal: AbortSignal): Promise<PersistentVolume | undefined>;
  /** One PersistentVolume, by name (never the collection). */
  watchPersistentVolume(): Watcher<PersistentVolume>;
  getVolumeAttachment(name: string, signal: AbortSignal): Promise<VolumeAttachment | undefined>;
  getCsiDriver(name: string, signal: AbortSignal): Promise<CsiDriverInfo | undefined>;
  getNode(name: string, signal: AbortSignal): Promise<NodeInfo | undefined>;
  watchNode(): Watcher<NodeInfo>;
  /** The Pods bound to this node (fieldSelector spec.nodeName, as the kubelet lists them) and the list's resourceVersion. */
  listPodsOnNode(nodeName: string, signal: AbortSignal): Promise<{ resourceVersion: string; items: NodePod[] }>;
  /** Changes of the Pods bound to this node after `resourceVersion`. */
  watchPodsOnNode(
    opts: { nodeName: string; resourceVersion: string; signal: AbortSignal },
    onEvent: (type: WatchEventType, obj: NodePod) => void,
  ): Promise<void>;
  getLease(namespace: string, name: string, signal: AbortSignal): Promise<Lease | undefined>;
  createLease(obj: Lease, signal: AbortSignal): Promise<Lease>;
  /** A PUT with the object's resourceVersion: 409 when someone else wrote it since. */
  replaceLease(obj: Lease, signal: AbortSignal): Promise<Lease>;

  /** The secret's data, base64-decoded; undefined when it does not exist. */
  getSecretData(namespace: string, name: string, signal: AbortSignal): Promise<Record<string, string> | undefined>;

  /**
   * undefined when the token is not authenticated for any of `audiences`; with `audiences`
   * undefined, for the API server's own audiences (a TokenReview without spec.audiences).
   */
  reviewToken(token: string, audiences: string[] | undefined, signal: AbortSignal): Promise<UserInfo | undefined>;
  reviewAccess(
    user: UserInfo,
    attrs: { namespace: string; verb: string; group: string; resource: string; subresource?: string },
    signal: AbortSignal,
  ): Promise<boolean>;
}

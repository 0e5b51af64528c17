// Plain views of the Kubernetes objects the decisions need, so plan/ and heal/ never see a
// client library type (kube/ converts).

/** A sidecar as its CSIAddonsNode describes it. */
export interface SidecarInfo {
  /** "<namespace>/<name>" of the CSIAddonsNode. */
  key: string;
  namespace: string;
  name: string;
  uid: string;
  driver: string;
  endpoint: string;
  nodeId: string;
  annotations: Readonly<Record<string, string>>;
  /** metadata.ownerReferences: the sidecar names its pod's controller (or its pod) there. */
  owners: readonly OwnerRef[];
  deleting: boolean;
}

export interface OwnerRef {
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
}

/** What the controller reads of the pod behind a sidecar's pod:// endpoint (one GET). */
export interface SidecarPod {
  uid: string;
  /** spec.nodeName: the node the scheduler bound it to ("" while unscheduled). */
  nodeName: string;
  /** status.podIP, undefined while it has none. */
  ip: string | undefined;
  /** spec.serviceAccountName ("default" when unset, as the API server defaults it). */
  serviceAccount: string;
  /** metadata.ownerReferences. */
  owners: readonly OwnerRef[];
}

export interface ClaimRef {
  namespace: string;
  name: string;
  uid: string | undefined;
}

export interface PvInfo {
  name: string;
  uid: string;
  driver: string;
  handle: string;
  deleting: boolean;
  claim: ClaimRef | undefined;
}

export interface AttachmentInfo {
  attacher: string;
  nodeName: string;
  pvName: string | undefined;
  attached: boolean;
  /** When the VolumeAttachment was created (ms since the epoch), when known. */
  since?: number;
}

/** What the driver behind a sidecar offers, from its relayed GetCapabilities. */
export interface HealerCapabilities {
  healVolume: boolean;
  getVolumeHealth: boolean;
}

export type Mode = "ALWAYS" | "IF_ABNORMAL";
/** Why a heal is asked for (healer.v1.HealReason): what it obliges the driver to do. */
export type Reason = "DRIVER_RESTARTED" | "VOLUME_ABNORMAL" | "OPERATOR_REQUEST";

/** What one pod that uses a healed volume sees, as the driver answered for its target. */
export interface PodAnswer {
  namespace: string;
  name: string;
  uid: string;
  /** UNKNOWN: the driver did not answer for it (or answered something this controller does not know). */
  state: "WHOLE_IN_PLACE" | "RESTART_NEEDED" | "NOT_MOUNTED" | "UNKNOWN";
  reason: string;
  message: string;
}

export type Trigger = "restart" | "reconnect" | "first-sight" | "periodic" | "manual";

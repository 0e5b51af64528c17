// The demo's little cluster: one node running the node-plugin pod (pod IP 127.0.0.1: the healer
// controller resolves the sidecar's pod:// endpoint to it), three volumes staged on it (two
// filesystems, one raw block device), their VolumeAttachments, and a stage secret.
import { DRIVER, NAMESPACE, baseObjects, namespace, onLocalhost, pv, secret, volumeAttachment, type PvOptions } from "../support/fixtures.js";
import type { StubState } from "../support/driver-stub.js";
import { CONTROLLER_SA } from "./controller-process.js";

export interface DemoVolume {
  pv: string;
  handle: string;
  /** For people: what kind of volume this is. */
  kind: string;
  options: PvOptions;
  attachmentMetadata?: Record<string, string>;
}

export const STAGE_SECRET = { namespace: NAMESPACE, name: "ceph-user" };

export const VOLUMES: readonly DemoVolume[] = [
  {
    pv: "pv-postgres",
    handle: "vol-postgres",
    kind: "ext4, stage secret",
    options: { handle: "vol-postgres", fsType: "ext4", secret: STAGE_SECRET },
    attachmentMetadata: { devicePath: "/dev/nbd0" },
  },
  {
    pv: "pv-shared",
    handle: "vol-shared",
    kind: "xfs, RWX",
    options: { handle: "vol-shared", fsType: "xfs", accessModes: ["ReadWriteMany"], mountOptions: ["discard"] },
  },
  { pv: "pv-raw", handle: "vol-raw", kind: "raw block", options: { handle: "vol-raw", block: true } },
];

export function seedObjects(): unknown[] {
  return [
    ...baseObjects().map((o) => (o.kind === "Pod" ? onLocalhost(o) : o)),
    namespace(CONTROLLER_SA.namespace),
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: CONTROLLER_SA.name, namespace: CONTROLLER_SA.namespace } },
    secret(STAGE_SECRET.namespace, STAGE_SECRET.name, { userID: "healer", userKey: "AQBdemo-not-a-real-key==" }),
    ...VOLUMES.flatMap((v) => [pv(v.pv, v.options), volumeAttachment(v.pv, v.handle, { metadata: v.attachmentMetadata })]),
  ];
}

/** The driver's state file: every volume staged and healthy. */
export function healthyState(): StubState {
  return { volumes: Object.fromEntries(VOLUMES.map((v) => [v.handle, { state: "HEALTHY" as const }])) };
}

export const DEAD_MOUNT = {
  state: "ABNORMAL" as const,
  reason: "TransportEndpointNotConnected",
  message: "the user-space mount process is gone; the mount point answers ENOTCONN",
};

export { DRIVER };

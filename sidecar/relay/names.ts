// Names and paths the kubelet computes, reproduced exactly so the driver sees what NodeStage saw.
import { createHash } from "node:crypto";
import { posix } from "node:path";

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function isDnsSubdomain(name: string): boolean {
  return name.length > 0 && name.length <= 253 && DNS1123_SUBDOMAIN.test(name);
}

/** The external-attacher's VolumeAttachment name for (volume, driver, node). */
export function volumeAttachmentName(volumeHandle: string, driverName: string, nodeName: string): string {
  return `csi-${sha256(volumeHandle + driverName + nodeName)}`;
}

/** The kubelet's staging path: per PV for block volumes, per volume handle for filesystems. */
export function stagingPath(root: string, pvName: string, driverName: string, volumeHandle: string, block: boolean): string {
  return block ? posix.join(root, "volumeDevices", "staging", pvName) : posix.join(root, driverName, sha256(volumeHandle), "globalmount");
}

/** What the kubelet puts in Node.status.volumesInUse for a CSI volume. */
export function volumeInUseName(driverName: string, volumeHandle: string): string {
  return `kubernetes.io/csi/${driverName}^${volumeHandle}`;
}

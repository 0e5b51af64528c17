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

/** Where the kubelet keeps CSI's plugin directory under its root (kubernetes pkg/volume/csi: CSIPluginName under plugins/). */
const CSI_PLUGIN_DIR = "plugins/kubernetes.io/csi";

/**
 * The kubelet's --root-dir, from the staging root it implies (`<root>/plugins/kubernetes.io/csi`);
 * undefined when the staging root is laid out otherwise, and no pod's path can be told.
 */
export function kubeletRootOf(stagingRoot: string): string | undefined {
  const dir = posix.normalize(stagingRoot).replace(/\/+$/, "");
  return dir.endsWith(`/${CSI_PLUGIN_DIR}`) ? dir.slice(0, -CSI_PLUGIN_DIR.length - 1) || "/" : undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A Pod UID as the API server makes them: nothing else may become part of a path. */
export const isPodUid = (uid: string): boolean => UUID.test(uid);

/**
 * NodePublishVolume's target_path for one Pod, as the kubelet lays it out (kubernetes
 * pkg/volume/csi: csi_mounter.go getTargetPath + GetCSIMounterPath; csi_block.go getPublishPath).
 * The PV name is the kubelet's spec name, a DNS-1123 subdomain that EscapeQualifiedName leaves as
 * it is; the UID a UUID. So no name can make a path outside the kubelet's own.
 */
export function publishTargetPath(kubeletRoot: string, pvName: string, podUid: string, block: boolean): string {
  if (!isDnsSubdomain(pvName) || !isPodUid(podUid))
    throw new Error(`no publish path for PersistentVolume ${JSON.stringify(pvName)} and Pod UID ${JSON.stringify(podUid)}`);
  return block
    ? posix.join(kubeletRoot, CSI_PLUGIN_DIR, "volumeDevices", "publish", pvName, podUid)
    : posix.join(kubeletRoot, "pods", podUid, "volumes", "kubernetes.io~csi", pvName, "mount");
}

// Steps 3-6 of DESIGN 4.4: from a PV name to everything the driver needs, with precise errors.
import { failedPrecondition, notFound } from "../errors.js";
import type { KubeApi, PersistentVolume, VolumeAttachment } from "../kube/api.js";
import type { VolumeCapability } from "../../proto/gen/csi/v1/csi.js";
import { isBlock, volumeCapability } from "./capability.js";
import { stagingPath, volumeAttachmentName, volumeInUseName } from "./names.js";
import type { NodeCache } from "./node-cache.js";
import type { PodClaims } from "./pod-claims.js";
import { claimRefHolds } from "../../common/kube/pod-claims.js";
import type { AttachRequired } from "./attach-required.js";
import type { PvCache } from "./pv-cache.js";
import type { SecretCache } from "./secret-cache.js";

/** What the driver is told about a CSI volume, derived from its PV the kubelet's way (step 6). */
export interface CsiVolume {
  pvName: string;
  volumeId: string;
  stagingTargetPath: string;
  /** spec.csi.volumeAttributes. */
  volumeContext: Record<string, string>;
  capability: VolumeCapability;
  /** nodeStageSecretRef; read only when a call needs it (fetchStageSecrets). */
  secretRef: { namespace: string; name: string } | undefined;
  /** volumeMode Block: published to each pod as a device file, not a mount. */
  block: boolean;
  /** The claim bound to the PV (its claimRef, while that still holds): whose Pods use it. */
  claim: { namespace: string; name: string } | undefined;
}

export interface ResolvedVolume extends CsiVolume {
  driver: string;
  /** The VolumeAttachment named for this node as read by this request: null when there is none, undefined when not read. */
  attachment: VolumeAttachment | null | undefined;
  attachmentName: string;
}

/** For a PV already known to be CSI (callers check spec.csi first, each with its own error). */
export function describeCsiVolume(pvName: string, pv: PersistentVolume, stagingRoot: string): CsiVolume {
  const csi = pv.spec.csi;
  if (!csi) throw new Error(`PersistentVolume ${pvName} is not a CSI volume`);
  const ref = csi.nodeStageSecretRef;
  const claim = pv.spec.claimRef;
  return {
    pvName,
    volumeId: csi.volumeHandle,
    stagingTargetPath: stagingPath(stagingRoot, pvName, csi.driver, csi.volumeHandle, isBlock(pv)),
    volumeContext: csi.volumeAttributes ?? {},
    capability: volumeCapability(pv),
    secretRef: ref?.name ? { namespace: ref.namespace, name: ref.name } : undefined,
    block: isBlock(pv),
    claim: claim?.namespace && claim.name && claimRefHolds(pv.status?.phase) ? { namespace: claim.namespace, name: claim.name } : undefined,
  };
}

export interface ResolverDeps {
  kube: KubeApi;
  attach: Pick<AttachRequired, "required" | "skipsAttach">;
  nodes: NodeCache;
  pods: Pick<PodClaims, "uses" | "usersOf">;
  pvs: PvCache;
  secrets: SecretCache;
  nodeName: string;
  stagingRoot: string;
}

/**
 * The PV may come from the watched cache (pv-cache.ts says why that cannot mislead, even for a
 * heal). Step 4 is never cached: the watched Node answers it without a request (a kubelet lists
 * every mounted attachable volume in status.volumesInUse), or the watched Pods of this node (a
 * Pod here uses the PV's claim: how a volume of a driver without attach is found), else the
 * VolumeAttachment is read.
 */
export async function resolveVolume(deps: ResolverDeps, pvName: string, driverName: string, signal: AbortSignal): Promise<ResolvedVolume> {
  const pv = await deps.pvs.get(pvName, signal);
  if (!pv) throw notFound(`PersistentVolume ${pvName} not found`);
  if (pv.metadata.deletionTimestamp) throw failedPrecondition(`PersistentVolume ${pvName} is being deleted`);
  const csi = pv.spec.csi;
  if (!csi) throw failedPrecondition(`PersistentVolume ${pvName} is not a CSI volume`);
  if (csi.driver !== driverName) {
    throw failedPrecondition(`PersistentVolume ${pvName} belongs to driver ${csi.driver}, not ${driverName}`);
  }
  const attachmentName = volumeAttachmentName(csi.volumeHandle, driverName, deps.nodeName);
  const attachment = await onThisNode(deps, pv, driverName, attachmentName, signal);
  return { ...describeCsiVolume(pvName, pv, deps.stagingRoot), driver: driverName, attachment, attachmentName };
}

/**
 * The stage secret's data; FAILED_PRECONDITION (or `missing`) naming the secret, never its
 * contents, when it does not exist.
 */
export async function fetchStageSecrets(
  deps: Pick<ResolverDeps, "secrets">,
  vol: CsiVolume,
  signal: AbortSignal,
  missing: (msg: string) => Error = failedPrecondition,
): Promise<Record<string, string>> {
  const ref = vol.secretRef;
  if (!ref) return {};
  const data = await deps.secrets.get(ref.namespace, ref.name, signal);
  if (!data) throw missing(`stage secret ${ref.namespace}/${ref.name} of PersistentVolume ${vol.pvName} not found`);
  return data;
}

/**
 * Step 4: is the volume on this node? The watched Node's volumesInUse, then the watched Pods of this
 * node, answer without a request; otherwise the VolumeAttachment named for this node must say
 * attached. Returns the attachment when it had to be read (undefined when a watch answered).
 */
async function onThisNode(
  deps: ResolverDeps,
  pv: PersistentVolume,
  driverName: string,
  vaName: string,
  signal: AbortSignal,
): Promise<VolumeAttachment | null | undefined> {
  const handle = pv.spec.csi!.volumeHandle;
  const node = await deps.nodes.get(signal);
  if (node?.status?.volumesInUse?.includes(volumeInUseName(driverName, handle))) return undefined;
  const claim = pv.spec.claimRef;
  // Only a driver without an attach step (or one whose CSIDriver is not known) needs the Pods: the
  // volumes of one that attaches have their VolumeAttachment, and its sidecar never watches Pods.
  const podsTell = claim?.namespace && claim.name && claimRefHolds(pv.status?.phase) && (await deps.attach.required(driverName, signal)) !== true;
  if (podsTell && (await deps.pods.uses(claim!.namespace!, claim!.name!, signal))) return undefined;
  const va = (await deps.kube.getVolumeAttachment(vaName, signal)) ?? null;
  if (va?.status?.attached) return va;
  throw failedPrecondition(
    `volume ${handle} of PersistentVolume ${pv.metadata.name} is not in use on node ${deps.nodeName}` +
      (va ? ` (VolumeAttachment ${vaName} is not attached)` : ""),
  );
}

/**
 * NodeStageVolume's publish_context, as the kubelet makes it: the attachment's metadata; empty for a
 * driver whose CSIDriver says it has no attach step. The VolumeAttachment is read first and the
 * CSIDriver asked only when there is none, where it decides: a driver that attaches gets no heal of
 * a volume without its attachment (the kubelet would not stage it: detached, or being detached);
 * one without attach, or with no CSIDriver known, an empty publish_context. So a driver that
 * attaches costs no CSIDriver read while its volumes are attached, and one known (within the
 * minute) to have no attach step costs no VolumeAttachment read. Two differences from the kubelet:
 * with no CSIDriver known, a volume without an attachment still heals (DESIGN 4.4 step 4 takes
 * volumesInUse alone for drivers without attach); and an attachment left over for a driver whose
 * CSIDriver now says false (made again without attach) passes its metadata, which such a driver,
 * having no attach step, does not read.
 */
export async function fetchPublishContext(deps: ResolverDeps, vol: ResolvedVolume, signal: AbortSignal): Promise<Record<string, string>> {
  let va = vol.attachment;
  if (va === undefined) {
    if (deps.attach.skipsAttach(vol.driver)) return {};
    va = (await deps.kube.getVolumeAttachment(vol.attachmentName, signal)) ?? null;
  }
  if (!va) {
    if (await deps.attach.required(vol.driver, signal)) {
      throw failedPrecondition(
        `VolumeAttachment ${vol.attachmentName} of PersistentVolume ${vol.pvName} not found: driver ${vol.driver} attaches its volumes (its CSIDriver says attachRequired), and the kubelet stages none without its attachment`,
      );
    }
    return {};
  }
  if (!va.status?.attached) {
    throw failedPrecondition(`VolumeAttachment ${vol.attachmentName} of PersistentVolume ${vol.pvName} is not attached`);
  }
  return va.status.attachmentMetadata ?? {};
}

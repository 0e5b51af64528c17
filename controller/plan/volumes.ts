// DESIGN 7.1: the volumes of a sidecar are the PVs of its driver on its node — attached through a
// VolumeAttachment, or listed in the Node's volumesInUse — deduplicated, never those being deleted.
// Beyond DESIGN, a pass adds the PVs whose claims the node's Pods mount (withVolumes): a kubelet
// names only attachable volumes in volumesInUse, so a driver without attach is found only so.
import type { AttachmentInfo, PvInfo, SidecarInfo } from "./types.js";

export interface VolumeSources {
  /** VolumeAttachments whose spec.nodeName is the sidecar's node. */
  attachments: readonly AttachmentInfo[];
  /** The Node's status.volumesInUse. */
  volumesInUse: readonly string[];
  pvByName(name: string): PvInfo | undefined;
  /** Every PV naming this volume handle: volumesInUse names the handle only, so each of them may be
   * the one staged here, and healing one twice costs less than leaving one dead. */
  pvsByHandle(driver: string, handle: string): Iterable<PvInfo>;
}

const IN_USE_PREFIX = "kubernetes.io/csi/";

type Sidecar = Pick<SidecarInfo, "driver" | "nodeId">;

/** Collects the PVs of the sidecar's driver not being deleted, each once. */
function collector(sidecar: Sidecar) {
  const found = new Map<string, PvInfo>();
  const add = (pv: PvInfo | undefined) => {
    if (pv && pv.driver === sidecar.driver && !pv.deleting) found.set(pv.name, pv);
  };
  return { found, add };
}

export function volumesOfSidecar(sidecar: Sidecar, src: VolumeSources): PvInfo[] {
  const { found, add } = collector(sidecar);
  for (const va of src.attachments) {
    if (va.attached && va.attacher === sidecar.driver && va.nodeName === sidecar.nodeId && va.pvName) add(src.pvByName(va.pvName));
  }
  for (const entry of src.volumesInUse) {
    if (!entry.startsWith(IN_USE_PREFIX)) continue;
    const rest = entry.slice(IN_USE_PREFIX.length);
    const caret = rest.indexOf("^");
    if (caret < 0 || rest.slice(0, caret) !== sidecar.driver) continue;
    for (const pv of src.pvsByHandle(sidecar.driver, rest.slice(caret + 1))) add(pv);
  }
  // PV names are DNS subdomains (lowercase ASCII): code-unit order is what any locale's collation
  // gives them, without ICU's collator (twice the cost; its data loaded on first use).
  return [...found.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * The PVs bound to claims that the Pods on the sidecar's node mount ("namespace/name"). A PV with a
 * VolumeAttachment to that node (attached or not yet) is the attachment's to answer for: a Pod
 * scheduled there before its volume is attached must not make it a volume to heal.
 */
export function volumesOfClaims(
  sidecar: Sidecar,
  claims: Iterable<string>,
  src: Pick<VolumeSources, "attachments"> & { pvsByClaim(claim: string): Iterable<PvInfo> },
): PvInfo[] {
  const attached = new Set(src.attachments.map((va) => va.pvName));
  const { found, add } = collector(sidecar);
  for (const c of claims) for (const pv of src.pvsByClaim(c)) if (!attached.has(pv.name)) add(pv);
  return [...found.values()];
}

/** `known`, then those of `more` it does not name yet (the volumes a node's Pods add). */
export function withVolumes(known: readonly PvInfo[], more: readonly PvInfo[]): readonly PvInfo[] {
  const names = new Set(known.map((pv) => pv.name));
  const added = more.filter((pv) => !names.has(pv.name));
  return added.length === 0 ? known : [...known, ...added];
}

/**
 * DESIGN 7.2, first sight: a volume in use on the node (attached, or mounted by a Pod) since before
 * the node-plugin pod started was staged by an older pod, whose user-space mounts died with it.
 * A volume whose age is not known is not counted (a restart is never invented).
 */
export function stagedBeforePod(pvs: readonly PvInfo[], podStartedAt: number, since: (pv: PvInfo) => number | undefined): Set<string> {
  const older = new Set<string>();
  for (const pv of pvs) {
    const t = since(pv);
    if (t !== undefined && t < podStartedAt) older.add(pv.name);
  }
  return older;
}

// Which PersistentVolumeClaims a Pod holds on its node, the one rule both programs use to find a
// volume of a driver without an attach step (a kubelet names only attachable volumes in the Node's
// status.volumesInUse, and such a driver has no VolumeAttachment).

/** A Pod as far as its volumes go: the REST form and client-node's model both fit. */
export interface PodVolumes {
  metadata?: { name?: string; namespace?: string };
  spec?: { volumes?: readonly { name: string; persistentVolumeClaim?: { claimName: string }; ephemeral?: object }[] };
  status?: { phase?: string };
}

/** A claim as the rule keys it: "namespace/name". */
export const claimKey = (namespace: string, name: string) => `${namespace}/${name}`;

/** "namespace/claim" of every PVC the Pod mounts: its persistentVolumeClaim volumes and its generic ephemeral ones (claim "<pod>-<volume>"). */
export function claimsOfPod(pod: PodVolumes): string[] {
  // A finished Pod's volumes are unmounted and may be unstaged: it keeps no volume on the node.
  if (pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed") return [];
  const namespace = pod.metadata?.namespace ?? "";
  const out: string[] = [];
  for (const v of pod.spec?.volumes ?? []) {
    if (v.persistentVolumeClaim?.claimName) out.push(claimKey(namespace, v.persistentVolumeClaim.claimName));
    else if (v.ephemeral) out.push(claimKey(namespace, `${pod.metadata?.name ?? ""}-${v.name}`));
  }
  return out;
}

/**
 * Whether a PV's claimRef still names its claim. A Released PV (its claim deleted) or a Failed one
 * keeps the claimRef, and a new claim of that name (a StatefulSet's, made again) is bound to
 * another PV: a Pod mounting it says nothing about the old PV.
 */
export function claimRefHolds(phase: string | undefined): boolean {
  return phase !== "Released" && phase !== "Failed";
}

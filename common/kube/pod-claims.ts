// Which PersistentVolumeClaims a Pod holds on its node, the one rule both programs use to find a
// volume of a driver without an attach step (a kubelet names only attachable volumes in the Node's
// status.volumesInUse, and such a driver has no VolumeAttachment).

/** A container as far as its use of volumes goes. */
export interface ContainerVolumes {
  volumeMounts?: readonly { name: string; mountPropagation?: string }[];
  volumeDevices?: readonly { name: string }[];
  /** "Always" on an init container makes it a sidecar container: it runs beside the others. */
  restartPolicy?: string;
}

/** A Pod as far as its volumes go: the REST form and client-node's model both fit. */
export interface PodVolumes {
  metadata?: { name?: string; namespace?: string; uid?: string };
  spec?: {
    volumes?: readonly { name: string; persistentVolumeClaim?: { claimName: string; readOnly?: boolean }; ephemeral?: object }[];
    containers?: readonly ContainerVolumes[];
    initContainers?: readonly ContainerVolumes[];
  };
  status?: { phase?: string };
}

/**
 * How the Pod's running containers see a re-made mount of one of its volumes: the weakest
 * propagation among those that mount it (a container that keeps the dead mount keeps the Pod
 * broken). "None" when none mounts it as a filesystem (a block device, or not used by a container).
 */
export type Propagation = "None" | "HostToContainer" | "Bidirectional";

/** One claim as one Pod uses it. */
export interface ClaimUse {
  /** "namespace/claim". */
  claim: string;
  /** The Pod's volume's persistentVolumeClaim.readOnly: the kubelet publishes it read-only. */
  readOnly: boolean;
  propagation: Propagation;
}

const STRENGTH: Record<Propagation, number> = { None: 0, HostToContainer: 1, Bidirectional: 2 };

/** The weaker of two propagations: what a Pod whose containers mount a volume both ways sees. */
export const weakerPropagation = (a: Propagation, b: Propagation): Propagation => (STRENGTH[b] < STRENGTH[a] ? b : a);

function propagationOf(pod: PodVolumes, volume: string): Propagation {
  // Init containers that have finished hold no mount; those with restartPolicy Always run on.
  const running = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === "Always")];
  let weakest: Propagation | undefined;
  for (const c of running) {
    for (const m of c.volumeMounts ?? []) {
      if (m.name !== volume) continue;
      // Unset and unknown are None, as the kubelet treats them.
      const p: Propagation = m.mountPropagation === "HostToContainer" || m.mountPropagation === "Bidirectional" ? m.mountPropagation : "None";
      weakest = weakest === undefined ? p : weakerPropagation(weakest, p);
    }
  }
  return weakest ?? "None";
}

/** Every claim the Pod mounts (as claimsOfPod), with how it mounts it. */
export function claimUsesOfPod(pod: PodVolumes): ClaimUse[] {
  // A finished Pod's volumes are unmounted and may be unstaged: it keeps no volume on the node.
  if (pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed") return [];
  const namespace = pod.metadata?.namespace ?? "";
  const out: ClaimUse[] = [];
  for (const v of pod.spec?.volumes ?? []) {
    const name = v.persistentVolumeClaim?.claimName ?? (v.ephemeral ? `${pod.metadata?.name ?? ""}-${v.name}` : undefined);
    if (!name) continue;
    out.push({ claim: claimKey(namespace, name), readOnly: v.persistentVolumeClaim?.readOnly === true, propagation: propagationOf(pod, v.name) });
  }
  return out;
}

/** A claim as the rule keys it: "namespace/name". */
export const claimKey = (namespace: string, name: string) => `${namespace}/${name}`;

/** "namespace/claim" of every PVC the Pod mounts: its persistentVolumeClaim volumes and its generic ephemeral ones (claim "<pod>-<volume>"). */
export function claimsOfPod(pod: PodVolumes): string[] {
  return claimUsesOfPod(pod).map((u) => u.claim);
}

/**
 * Whether a PV's claimRef still names its claim. A Released PV (its claim deleted) or a Failed one
 * keeps the claimRef, and a new claim of that name (a StatefulSet's, made again) is bound to
 * another PV: a Pod mounting it says nothing about the old PV.
 */
export function claimRefHolds(phase: string | undefined): boolean {
  return phase !== "Released" && phase !== "Failed";
}

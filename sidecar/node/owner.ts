// Who owns this sidecar's pod, for the CSIAddonsNode's name and ownerReferences.
import type { KubeApi, OwnerReference } from "../kube/api.js";

export interface PodOwner {
  /** Kind and name used in the CSIAddonsNode name (a ReplicaSet resolves to its Deployment). */
  kind: string;
  name: string;
  /** What the CSIAddonsNode is owned by, so it goes away with its workload. */
  ownerReference: OwnerReference;
  podUid: string;
}

export async function resolvePodOwner(kube: KubeApi, namespace: string, pod: string, signal: AbortSignal): Promise<PodOwner> {
  const p = await kube.getPod(namespace, pod, signal);
  const podUid = p.metadata.uid ?? "";
  const podRef: OwnerReference = { apiVersion: "v1", kind: "Pod", name: pod, uid: podUid };
  const controller = p.metadata.ownerReferences?.find((o) => o.controller);
  if (!controller) return { kind: "Pod", name: pod, ownerReference: podRef, podUid };
  if (controller.kind === "ReplicaSet") {
    // A ReplicaSet changes on every rollout; the Deployment names the workload, but the Pod owns the
    // object so a rollout's old pods take their objects with them.
    const rs = await kube.getReplicaSet(namespace, controller.name, signal);
    const deployment = rs.metadata.ownerReferences?.find((o) => o.controller && o.kind === "Deployment");
    const named = deployment ?? controller;
    return { kind: named.kind, name: named.name, ownerReference: podRef, podUid };
  }
  return {
    kind: controller.kind,
    name: controller.name,
    ownerReference: { apiVersion: controller.apiVersion, kind: controller.kind, name: controller.name, uid: controller.uid },
    podUid,
  };
}

export function sameOwner(a: PodOwner, b: PodOwner): boolean {
  return a.kind === b.kind && a.name === b.name && a.ownerReference.uid === b.ownerReference.uid;
}

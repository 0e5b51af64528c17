// The CSIAddonsNode this sidecar wants, built on the object the API has (others' annotations,
// owner references and status stay), and whether an object the API shows is that one.
import type { CSIAddonsNode } from "../kube/api.js";
import type { PodOwner } from "./owner.js";

export const ANNOTATION_PREFIX = "sidecar.csiaddons.openshift.io/";
export const CREATED_BY_POD_UID = `${ANNOTATION_PREFIX}createdByPodUID`;
export const LAST_UPDATED_AT = `${ANNOTATION_PREFIX}lastUpdatedAt`;
export const DRIVER_RESTARTED_AT = `${ANNOTATION_PREFIX}driverRestartedAt`;

/** What the spec says: the driver's name as it reported it, where to reach us, the node. */
export interface DriverSpec {
  driverName: string;
  endpoint: string;
  nodeId: string;
}

export interface Wanted extends DriverSpec {
  name: string;
  namespace: string;
  owner: PodOwner;
  /** The pod's uid from the downward API; the Pod's own when empty. */
  podUid: string;
  /** When the driver last restarted (ISO 8601), once one was seen. */
  restartedAt: string | undefined;
}

export function desiredCSIAddonsNode(w: Wanted, existing: CSIAddonsNode | undefined): CSIAddonsNode {
  const meta = existing?.metadata ?? {};
  const annotations: Record<string, string> = {
    ...meta.annotations,
    [CREATED_BY_POD_UID]: w.podUid || w.owner.podUid,
    [LAST_UPDATED_AT]: new Date().toISOString(),
  };
  if (w.restartedAt) annotations[DRIVER_RESTARTED_AT] = w.restartedAt;
  // Others' references stay; ours is replaced, also one to a former owner of the same name.
  const ours = w.owner.ownerReference;
  const others = (meta.ownerReferences ?? []).filter((o) => o.uid !== ours.uid && !(o.kind === ours.kind && o.name === ours.name));
  return {
    apiVersion: "csiaddons.openshift.io/v1alpha1",
    kind: "CSIAddonsNode",
    metadata: { ...meta, name: w.name, namespace: w.namespace, annotations, ownerReferences: [...others, ours] },
    spec: { driver: { name: w.driverName, endpoint: w.endpoint, nodeID: w.nodeId } },
    ...(existing?.status ? { status: existing.status } : {}),
  };
}

/** The object's spec is ours and it names our owner (by uid: one made again under the same name is another owner). */
export function isAsWanted(obj: CSIAddonsNode, spec: Partial<DriverSpec>, ownerUid: string | undefined): boolean {
  const d = obj.spec?.driver;
  return (
    d?.name === spec.driverName &&
    d?.nodeID === spec.nodeId &&
    d?.endpoint === spec.endpoint &&
    (obj.metadata.ownerReferences ?? []).some((o) => o.uid === ownerUid)
  );
}

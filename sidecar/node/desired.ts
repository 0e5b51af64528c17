// The CSIAddonsNode this sidecar wants, built on the object the API has (others' annotations,
// owner references and status stay), and whether an object the API shows is that one.
import type { CSIAddonsNode } from "../kube/api.js";
import type { PodOwner } from "./owner.js";

export const ANNOTATION_PREFIX = "sidecar.csiaddons.openshift.io/";
export const CREATED_BY_POD_UID = `${ANNOTATION_PREFIX}createdByPodUID`;
export const LAST_UPDATED_AT = `${ANNOTATION_PREFIX}lastUpdatedAt`;
export const DRIVER_RESTARTED_AT = `${ANNOTATION_PREFIX}driverRestartedAt`;
/** A driver without a boot id lost its connection and came back: it may have restarted (DESIGN 4.2). */
export const DRIVER_RECONNECTED_AT = `${ANNOTATION_PREFIX}driverReconnectedAt`;
/** The boot id of the driver this pod's sidecar last saw, compared when a sidecar starts (DESIGN 4.2). */
export const DRIVER_BOOT_ID = `${ANNOTATION_PREFIX}driverBootId`;
/** The healer controller's handled marker (DESIGN 7.2): carried onto a recreated object, never set here. */
export const HANDLED_RESTART = "healer.csiaddons.openshift.io/handledRestart";

/**
 * What the object said last about restarts: written again onto an object created after a deletion,
 * so that a deletion neither forgets a restart nor makes a handled one look pending (DESIGN 7.2).
 */
export const CARRIED_ANNOTATIONS = [CREATED_BY_POD_UID, DRIVER_RESTARTED_AT, DRIVER_RECONNECTED_AT, DRIVER_BOOT_ID, HANDLED_RESTART] as const;

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
  /** Our restart annotations as this process set them (driverRestartedAt, driverReconnectedAt, driverBootId). */
  own: Readonly<Record<string, string>>;
  /** CARRIED_ANNOTATIONS as the object last showed them; under the existing object's, over nothing. */
  carried: Readonly<Record<string, string>>;
}

export function desiredCSIAddonsNode(w: Wanted, existing: CSIAddonsNode | undefined): CSIAddonsNode {
  const meta = existing?.metadata ?? {};
  const annotations: Record<string, string> = {
    ...w.carried,
    ...meta.annotations,
    ...w.own,
    [CREATED_BY_POD_UID]: w.podUid || w.owner.podUid,
    [LAST_UPDATED_AT]: new Date().toISOString(),
  };
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

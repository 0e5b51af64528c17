// What the informers keep of each object (Transform in informer.ts): what cluster.ts reads (toPv,
// toAttachment, a PV's phase for its claim index, a Node's volumesInUse), and the identity
// client-node's cache compares.
// A PV's managedFields and annotations, a Node's images and conditions are never held.
import type { V1Node, V1ObjectMeta, V1PersistentVolume, V1VolumeAttachment } from "@kubernetes/client-node";

const identity = (m: V1ObjectMeta | undefined): V1ObjectMeta => ({ name: m?.name, namespace: m?.namespace, uid: m?.uid, resourceVersion: m?.resourceVersion });

export function slimPv(o: V1PersistentVolume): V1PersistentVolume {
  const csi = o.spec?.csi;
  const c = o.spec?.claimRef;
  return {
    metadata: { ...identity(o.metadata), deletionTimestamp: o.metadata?.deletionTimestamp },
    spec: {
      csi: csi ? { driver: csi.driver, volumeHandle: csi.volumeHandle } : undefined,
      claimRef: c ? { name: c.name, namespace: c.namespace, uid: c.uid } : undefined,
    },
    status: o.status?.phase ? { phase: o.status.phase } : undefined,
  };
}

export function slimAttachment(o: V1VolumeAttachment): V1VolumeAttachment {
  const { attacher, nodeName, source } = o.spec ?? {};
  return {
    // Its age tells whether an older node-plugin pod staged the volume (DESIGN 7.2, first sight).
    metadata: { ...identity(o.metadata), creationTimestamp: o.metadata?.creationTimestamp },
    spec: { attacher, nodeName, source: { persistentVolumeName: source?.persistentVolumeName } },
    status: o.status ? { attached: o.status.attached } : undefined,
  };
}

export function slimNode(o: V1Node): V1Node {
  return { metadata: identity(o.metadata), status: { volumesInUse: o.status?.volumesInUse } };
}

// Kubernetes objects for sidecar tests and the demo: a node-plugin pod owned by a DaemonSet,
// its Node, PVs (filesystem and block), VolumeAttachments and stage secrets.
import { createHash } from "node:crypto";
import type { DriverInfo } from "../../sidecar/driver/connection.js";

export const NAMESPACE = "csi";
export const NODE = "node-1";
export const POD = "csi-plugin-abcde";
export const DAEMONSET = "csi-plugin";
export const DAEMONSET_UID = "5f0c7c1e-1111-4a4a-9d9d-000000000001";
export const POD_UID = "5f0c7c1e-2222-4a4a-9d9d-000000000002";
export const DRIVER = "stub.csi.example.com";

export const upstreamCrdFile = new URL("./fixtures/upstream-csiaddonsnodes-crd.yaml", import.meta.url).pathname;
export const ourCrdFile = new URL("../../deploy/components/crd/csiaddons.openshift.io_csiaddonsnodes.yaml", import.meta.url).pathname;

type Obj = Record<string, unknown>;

export function namespace(name = NAMESPACE): Obj {
  return { apiVersion: "v1", kind: "Namespace", metadata: { name } };
}

export function daemonSet(): Obj {
  const labels = { app: DAEMONSET };
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: DAEMONSET, namespace: NAMESPACE, uid: DAEMONSET_UID },
    spec: {
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: "driver", image: "driver:dev" }] } },
    },
  };
}

export function pod(): Obj {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: POD,
      namespace: NAMESPACE,
      labels: { app: DAEMONSET },
      ownerReferences: [{ apiVersion: "apps/v1", kind: "DaemonSet", name: DAEMONSET, uid: DAEMONSET_UID, controller: true, blockOwnerDeletion: true }],
    },
    spec: { nodeName: NODE, containers: [{ name: "csi-addons-healer", image: "healer:dev" }] },
  };
}

/** The healer controller's restart marker on a CSIAddonsNode (DESIGN 7.2), as tests expect it. */
export const HANDLED_RESTART = "healer.csiaddons.openshift.io/handledRestart";

/** A pod running with IP 127.0.0.1, where a local healer controller finds the sidecar's port. */
export function onLocalhost(p: Obj): Obj {
  return { ...p, status: { phase: "Running", podIP: "127.0.0.1", podIPs: [{ ip: "127.0.0.1" }] } };
}

export function node(volumesInUse: string[] = []): Obj {
  return { apiVersion: "v1", kind: "Node", metadata: { name: NODE }, status: { volumesInUse } };
}

export interface PvOptions {
  handle?: string;
  driver?: string;
  block?: boolean;
  secret?: { namespace: string; name: string };
  accessModes?: string[];
  fsType?: string;
  mountOptions?: string[];
  attributes?: Record<string, string>;
  /** Bound to this claim (namespace csi unless given "namespace/name"). */
  claim?: string;
}

export function pv(name: string, o: PvOptions = {}): Obj {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: o.accessModes ?? ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Delete",
      volumeMode: o.block ? "Block" : "Filesystem",
      ...(o.mountOptions ? { mountOptions: o.mountOptions } : {}),
      csi: {
        driver: o.driver ?? DRIVER,
        volumeHandle: o.handle ?? `handle-${name}`,
        ...(o.block ? {} : { fsType: o.fsType ?? "ext4" }),
        volumeAttributes: o.attributes ?? { pool: "rbd" },
        ...(o.secret ? { nodeStageSecretRef: o.secret } : {}),
      },
      ...(o.claim ? { claimRef: claimRef(o.claim) } : {}),
    },
  };
}

function claimRef(claim: string): Obj {
  const [namespace, name] = claim.includes("/") ? claim.split("/") : [NAMESPACE, claim];
  return { kind: "PersistentVolumeClaim", namespace, name, uid: `uid-${name}` };
}

/**
 * A user's Pod on the node mounting these claims (namespace csi unless "namespace/name"): what a
 * kubelet goes by to stage volumes of a driver without attach, which it never lists in the Node's
 * volumesInUse.
 */
export function userPod(name: string, claims: string[], o: { phase?: string; nodeName?: string } = {}): Obj {
  const ns = claims[0]?.includes("/") ? claims[0].split("/")[0] : NAMESPACE;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns, uid: `uid-pod-${name}` },
    spec: {
      nodeName: o.nodeName ?? NODE,
      containers: [{ name: "app", image: "app:1" }],
      volumes: claims.map((c, i) => ({ name: `data-${i}`, persistentVolumeClaim: { claimName: c.includes("/") ? c.split("/")[1] : c } })),
    },
    status: { phase: o.phase ?? "Running" },
  };
}

export function vaName(handle: string, driver = DRIVER, nodeName = NODE): string {
  return `csi-${createHash("sha256")
    .update(handle + driver + nodeName)
    .digest("hex")}`;
}

export function volumeAttachment(pvName: string, handle: string, o: { attached?: boolean; metadata?: Record<string, string>; nodeName?: string } = {}): Obj {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: vaName(handle, DRIVER, o.nodeName ?? NODE) },
    spec: { attacher: DRIVER, nodeName: o.nodeName ?? NODE, source: { persistentVolumeName: pvName } },
    status: { attached: o.attached ?? true, attachmentMetadata: o.metadata ?? {} },
  };
}

/** The driver's CSIDriver: `attachRequired: false` for a driver without an attach step (CephFS, NFS). */
export function csiDriver(attachRequired: boolean, name = DRIVER): Obj {
  return { apiVersion: "storage.k8s.io/v1", kind: "CSIDriver", metadata: { name }, spec: { attachRequired } };
}

export function secret(ns: string, name: string, data: Record<string, string>): Obj {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name, namespace: ns },
    type: "Opaque",
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString("base64")])),
  };
}

/** The pod, its owner, the node and the namespace every sidecar test needs. */
export function baseObjects(volumesInUse: string[] = []): Obj[] {
  return [namespace(), daemonSet(), pod(), node(volumesInUse)];
}

export const CSI_ADDONS_NODE_NAME = `${NODE}-${NAMESPACE}-daemonset-${DAEMONSET}`;

/** What a driver handshake tells the sidecar: the stub's name, a node plugin with the healer, no add-on capabilities. */
export function driverInfo(o: Partial<DriverInfo> = {}): DriverInfo {
  return {
    name: DRIVER,
    vendorVersion: "1",
    manifest: {},
    capabilities: [],
    nodeService: true,
    controllerService: false,
    getVolumeHealth: true,
    healVolume: true,
    ...o,
  };
}

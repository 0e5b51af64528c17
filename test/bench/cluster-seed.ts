// The cluster bench's cluster (cluster.ts) as a real one writes it: the fleet's Nodes, node-plugin
// Pods, PVs and VolumeAttachments as the kubelets, the provisioner and the attacher write them
// (fleetSeed's asWritten), each PV's bound PersistentVolumeClaim, the stage secret the PVs name,
// and the healer controller's ServiceAccount (it asks TokenRequest for per-node tokens as it).
// The CSIAddonsNodes are not seeded: each node's sidecar (simulated or real) writes its own.
import { randomUUID } from "node:crypto";
import { CONTROLLER_SA } from "../demo/controller-process.js";
import { DAEMONSET, DAEMONSET_UID, NAMESPACE, namespace, onLocalhost, pod, secret } from "../support/fixtures.js";
import { fleetNode, fleetPv, fleetSeed, fleetVolumes, type Fleet } from "./fleet.js";

type Obj = Record<string, any>;

/** The namespace the PVs' claims (as fleet.ts's pvAsWritten names them) live in. */
const APPS = "apps";
const claimOf = (node: number, j: number) => `data-${fleetNode(node)}-${j}`;

/** A node-plugin Pod of the DaemonSet on node `n`, running on 127.0.0.1 (every sidecar listens there, on a port of its own). */
export function nodePluginPod(n: number, name: string, uid: string = randomUUID()): Obj {
  const p = pod() as { metadata: Obj; spec: Obj };
  return onLocalhost({ ...p, metadata: { ...p.metadata, name, uid }, spec: { ...p.spec, nodeName: fleetNode(n) } });
}

export function clusterSeed(f: Fleet): { crdFiles: string[]; seed: unknown[] } {
  const { crdFiles, seed } = fleetSeed(f, true);
  const pvcs = fleetVolumes(f).map(({ node, j }) => ({
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: claimOf(node, j),
      namespace: APPS,
      uid: `0000${String(node).padStart(4, "0")}-0000-4000-8000-${String(j).padStart(12, "0")}`,
      annotations: { "pv.kubernetes.io/bind-completed": "yes", "volume.kubernetes.io/storage-provisioner": "rbd.csi.ceph.com" },
      finalizers: ["kubernetes.io/pvc-protection"],
    },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, storageClassName: "csi-rbd-sc", volumeMode: "Filesystem", volumeName: fleetPv(node, j) },
    status: { phase: "Bound", accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" } },
  }));
  return {
    crdFiles,
    seed: [
      ...seed,
      namespace(APPS),
      namespace(CONTROLLER_SA.namespace),
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: CONTROLLER_SA.name, namespace: CONTROLLER_SA.namespace } },
      secret(NAMESPACE, "csi-rbd-node", { userID: "csi-rbd-node", userKey: "AQBnotarealkey==" }),
      ...pvcs,
    ],
  };
}

/** What a DaemonSet upgrade does to one node: its node-plugin Pod deleted, a new one (new name, new uid) created in its place. */
export interface PodReplacement {
  node: number;
  pod: string;
  uid: string;
}

export const DAEMONSET_OWNER = { apiVersion: "apps/v1", kind: "DaemonSet", name: DAEMONSET, uid: DAEMONSET_UID, controller: true, blockOwnerDeletion: true };

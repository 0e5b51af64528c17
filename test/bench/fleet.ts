// The restart bench's cluster: `nodes` nodes, each running a node-plugin pod of the csi-plugin
// DaemonSet (pod IP 127.0.0.1, since every sidecar listens there on a port of its own) with
// `volumesPerNode` filesystem volumes staged on it (a PV and an attached VolumeAttachment each).
import type { StubState, VolumeSpec } from "../../driver-stub/state.js";
import { DRIVER, daemonSet, namespace, onLocalhost, ourCrdFile, pod, pv, volumeAttachment } from "../support/fixtures.js";
import { healRequest } from "./volumes.js";

export interface Fleet {
  nodes: number;
  volumesPerNode: number;
}

const pad = (i: number, width: number) => String(i).padStart(width, "0");
export const fleetNode = (n: number) => `node-${pad(n, 2)}`;
export const fleetPod = (n: number) => `csi-plugin-${pad(n, 2)}`;
export const fleetPv = (n: number, j: number) => `pv-${pad(n, 2)}-${pad(j, 4)}`;
export const fleetVolume = (n: number, j: number) => `vol-${pad(n, 2)}-${pad(j, 4)}`;

export const volumeCount = (f: Fleet) => f.nodes * f.volumesPerNode;

/** Every (node, volume) pair of the fleet, node by node. */
export function fleetVolumes(f: Fleet): { node: number; j: number }[] {
  return Array.from({ length: volumeCount(f) }, (_, i) => ({ node: Math.floor(i / f.volumesPerNode), j: i % f.volumesPerNode }));
}

function nodePod(n: number): Record<string, unknown> {
  const p = pod() as { metadata: object; spec: object };
  return onLocalhost({ ...p, metadata: { ...p.metadata, name: fleetPod(n) }, spec: { ...p.spec, nodeName: fleetNode(n) } });
}

/**
 * The fleet's objects. `asWritten`: each also as the provisioner, the attacher and the kubelet
 * write it in a cluster (annotations, finalizers, volume attributes, a bound claim, a Node's
 * images and conditions), for measuring what the healer controller holds of a large cluster;
 * the API server's managedFields, which the in-memory API does not write, would add more.
 */
export function fleetSeed(f: Fleet, asWritten = false): { crdFiles: string[]; seed: unknown[] } {
  const seed: unknown[] = [namespace(), daemonSet()];
  for (let n = 0; n < f.nodes; n++) {
    const node = { apiVersion: "v1", kind: "Node", metadata: { name: fleetNode(n) }, status: { volumesInUse: [] } };
    seed.push(asWritten ? nodeAsWritten(node, n, f) : node, nodePod(n));
  }
  for (const { node, j } of fleetVolumes(f)) {
    const p = pv(fleetPv(node, j), { handle: fleetVolume(node, j) });
    const va = volumeAttachment(fleetPv(node, j), fleetVolume(node, j), { nodeName: fleetNode(node) });
    seed.push(asWritten ? pvAsWritten(p, node, j) : p, va);
  }
  return { crdFiles: [ourCrdFile], seed };
}

type Obj = Record<string, any>;

function pvAsWritten(p: Obj, node: number, j: number): Obj {
  const claim = `data-${fleetNode(node)}-${j}`;
  return {
    ...p,
    metadata: {
      ...p.metadata,
      labels: { "app.kubernetes.io/part-of": "bench" },
      annotations: { "pv.kubernetes.io/provisioned-by": p.spec.csi.driver, "volume.kubernetes.io/provisioner-deletion-secret-name": "csi-rbd-provisioner", "volume.kubernetes.io/provisioner-deletion-secret-namespace": "csi" },
      finalizers: ["kubernetes.io/pv-protection", "external-provisioner.volume.kubernetes.io/finalizer"],
    },
    spec: {
      ...p.spec,
      storageClassName: "csi-rbd-sc",
      claimRef: { apiVersion: "v1", kind: "PersistentVolumeClaim", namespace: "apps", name: claim, uid: `0000${String(node).padStart(4, "0")}-0000-4000-8000-${String(j).padStart(12, "0")}`, resourceVersion: "1" },
      csi: {
        ...p.spec.csi,
        volumeAttributes: {
          clusterID: "b9127830-b0cc-4e34-aa47-9d1a2e9949a8",
          imageFeatures: "layering,deep-flatten,exclusive-lock,object-map,fast-diff",
          imageName: `csi-vol-${p.spec.csi.volumeHandle}`,
          journalPool: "replicapool",
          pool: "replicapool",
          "storage.kubernetes.io/csiProvisionerIdentity": "1764000000000-1234-rbd.csi.ceph.com",
        },
        nodeStageSecretRef: { name: "csi-rbd-node", namespace: "csi" },
        controllerExpandSecretRef: { name: "csi-rbd-provisioner", namespace: "csi" },
      },
    },
  };
}

function nodeAsWritten(n: Obj, i: number, f: Fleet): Obj {
  const ids = Array.from({ length: f.volumesPerNode }, (_, j) => `kubernetes.io/csi/${DRIVER}^${fleetVolume(i, j)}`);
  return {
    ...n,
    metadata: { ...n.metadata, labels: { "kubernetes.io/hostname": fleetNode(i), "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": `zone-${i % 3}` } },
    status: {
      capacity: { cpu: "16", memory: "65843012Ki", pods: "110", "ephemeral-storage": "102687672Ki" },
      allocatable: { cpu: "15800m", memory: "64716612Ki", pods: "110", "ephemeral-storage": "94636958600" },
      conditions: ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"].map((type) => ({ type, status: type === "Ready" ? "True" : "False", lastHeartbeatTime: "2026-12-01T00:00:00Z", lastTransitionTime: "2026-11-01T00:00:00Z", reason: `Kubelet${type}`, message: `kubelet reports ${type}` })),
      addresses: [{ type: "InternalIP", address: `10.0.${Math.floor(i / 250)}.${i % 250}` }, { type: "Hostname", address: fleetNode(i) }],
      nodeInfo: { machineID: "0".repeat(32), systemUUID: "0".repeat(36), bootID: "0".repeat(36), kernelVersion: "6.8.0", osImage: "Ubuntu 24.04", containerRuntimeVersion: "containerd://1.7.0", kubeletVersion: "v1.34.0", kubeProxyVersion: "v1.34.0", operatingSystem: "linux", architecture: "amd64" },
      images: Array.from({ length: 40 }, (_, k) => ({ names: [`registry.example.com/team/app-${k}@sha256:${String(k).padStart(64, "0")}`, `registry.example.com/team/app-${k}:v1.${k}`], sizeBytes: 100_000_000 + k })),
      volumesInUse: ids,
      volumesAttached: ids.map((name) => ({ name, devicePath: "" })),
    },
  };
}

/** One node's driver state file: its volumes staged, each as `spec` says. */
export function fleetStubState(f: Fleet, node: number, spec: VolumeSpec): StubState {
  return { volumes: Object.fromEntries(Array.from({ length: f.volumesPerNode }, (_, j) => [fleetVolume(node, j), { ...spec }])) };
}

/** NodeHealVolume for one volume as its sidecar would send it. */
export const fleetHealRequest = (node: number, j: number) => healRequest(fleetPv(node, j), fleetVolume(node, j));

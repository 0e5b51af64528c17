// The restart bench's cluster: `nodes` nodes, each running a node-plugin pod of the csi-plugin
// DaemonSet (pod IP 127.0.0.1, since every sidecar listens there on a port of its own) with
// `volumesPerNode` filesystem volumes staged on it (a PV and an attached VolumeAttachment each).
import type { StubState, VolumeSpec } from "../../driver-stub/state.js";
import { daemonSet, namespace, onLocalhost, ourCrdFile, pod, pv, volumeAttachment } from "../support/fixtures.js";
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

export function fleetSeed(f: Fleet): { crdFiles: string[]; seed: unknown[] } {
  const seed: unknown[] = [namespace(), daemonSet()];
  for (let n = 0; n < f.nodes; n++) {
    seed.push({ apiVersion: "v1", kind: "Node", metadata: { name: fleetNode(n) }, status: { volumesInUse: [] } }, nodePod(n));
  }
  for (const { node, j } of fleetVolumes(f)) {
    seed.push(pv(fleetPv(node, j), { handle: fleetVolume(node, j) }), volumeAttachment(fleetPv(node, j), fleetVolume(node, j), { nodeName: fleetNode(node) }));
  }
  return { crdFiles: [ourCrdFile], seed };
}

/** One node's driver state file: its volumes staged, each as `spec` says. */
export function fleetStubState(f: Fleet, node: number, spec: VolumeSpec): StubState {
  return { volumes: Object.fromEntries(Array.from({ length: f.volumesPerNode }, (_, j) => [fleetVolume(node, j), { ...spec }])) };
}

/** NodeHealVolume for one volume as its sidecar would send it. */
export const fleetHealRequest = (node: number, j: number) => healRequest(fleetPv(node, j), fleetVolume(node, j));

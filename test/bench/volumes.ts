// The bench's node: N filesystem volumes staged on it, each with a PV and an attached
// VolumeAttachment, and what a direct caller must send to reach volume i (the sidecar derives the
// same request from the PV).
import { volumeCapability } from "../../sidecar/relay/capability.js";
import { stagingPath, volumeInUseName } from "../../sidecar/relay/names.js";
import type { PersistentVolume } from "../../sidecar/kube/api.js";
import type { StubState, VolumeSpec } from "../../driver-stub/state.js";
import { DRIVER, baseObjects, ourCrdFile, pv, volumeAttachment } from "../support/fixtures.js";
import { HealReason } from "../../proto/gen/healer/v1/healer.js";

export const STAGING_ROOT = "/var/lib/kubelet/plugins/kubernetes.io/csi/";
const pad = (i: number) => String(i).padStart(4, "0");
export const pvName = (i: number) => `pv-${pad(i)}`;
export const volumeId = (i: number) => `vol-${pad(i)}`;

export function seedObjects(n: number): { crdFiles: string[]; seed: unknown[] } {
  // As a kubelet reports them: every mounted attachable volume in the Node's status.volumesInUse.
  const seed: unknown[] = [...baseObjects(Array.from({ length: n }, (_, i) => volumeInUseName(DRIVER, volumeId(i))))];
  for (let i = 0; i < n; i++) seed.push(pv(pvName(i), { handle: volumeId(i) }), volumeAttachment(pvName(i), volumeId(i)));
  return { crdFiles: [ourCrdFile], seed };
}

/** The driver-stub's state file: all n volumes staged, each as `spec` says. */
export function stubState(n: number, spec: VolumeSpec): StubState {
  return { volumes: Object.fromEntries(Array.from({ length: n }, (_, i) => [volumeId(i), { ...spec }])) };
}

/** NodeGetVolumeHealth as the sidecar sends it for a fixture PV (they carry pool: rbd). */
export function healthRequest(pvName: string, volumeId: string) {
  return {
    volumeId,
    stagingTargetPath: stagingPath(STAGING_ROOT, pvName, DRIVER, volumeId, false),
    volumePath: "",
    volumeContext: { pool: "rbd" },
  };
}

/** NodeHealVolume as the sidecar sends it after a restart for a fixture PV (RWO ext4, attached without metadata, no pod using it). */
export function healRequest(pvName: string, volumeId: string) {
  return {
    ...healthRequest(pvName, volumeId),
    volumeCapability: volumeCapability(pv(pvName, { handle: volumeId }) as unknown as PersistentVolume),
    secrets: {},
    publishContext: {},
    reason: HealReason.DRIVER_RESTARTED,
    targets: [],
  };
}

export const directHealthRequest = (i: number) => healthRequest(pvName(i), volumeId(i));
export const directHealRequest = (i: number) => healRequest(pvName(i), volumeId(i));

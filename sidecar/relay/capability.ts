// The VolumeCapability the kubelet derived for NodeStageVolume, rebuilt from the PV.
import { VolumeCapability_AccessMode_Mode as Mode, type VolumeCapability } from "../../proto/gen/csi/v1/csi.js";
import type { PersistentVolume } from "../kube/api.js";

// DESIGN 4.4 step 6, one CSI mode per Kubernetes mode.
const MODES: Record<string, Mode> = {
  ReadWriteOnce: Mode.SINGLE_NODE_MULTI_WRITER,
  ReadWriteOncePod: Mode.SINGLE_NODE_SINGLE_WRITER,
  ReadWriteMany: Mode.MULTI_NODE_MULTI_WRITER,
  ReadOnlyMany: Mode.MULTI_NODE_READER_ONLY,
};

export function isBlock(pv: PersistentVolume): boolean {
  return pv.spec.volumeMode === "Block";
}

export function volumeCapability(pv: PersistentVolume): VolumeCapability {
  // The kubelet stages with the PV's first access mode (ReadWriteOnce when it lists none), however
  // many it lists: a heal must ask for that one. The widest of several would ask a driver to
  // re-stage [ReadOnlyMany, ReadWriteOnce] writable where the kubelet staged it read-only.
  const mode = MODES[pv.spec.accessModes?.[0] ?? "ReadWriteOnce"] ?? Mode.UNKNOWN;
  return {
    accessType: isBlock(pv)
      ? { $case: "block", block: {} }
      : { $case: "mount", mount: { fsType: pv.spec.csi?.fsType ?? "", mountFlags: pv.spec.mountOptions ?? [], volumeMountGroup: "" } },
    accessMode: { mode },
  };
}

// The VolumeCapability the kubelet derived for NodeStageVolume, rebuilt from the PV.
import { VolumeCapability_AccessMode_Mode as Mode, type VolumeCapability } from "../../proto/gen/csi/v1/csi.js";
import type { PersistentVolume } from "../kube/api.js";

// When a PV lists several modes, the most permissive sharing wins, as the widest mode is what
// the volume may be staged for.
const PRECEDENCE: [string, Mode][] = [
  ["ReadWriteMany", Mode.MULTI_NODE_MULTI_WRITER],
  ["ReadWriteOncePod", Mode.SINGLE_NODE_SINGLE_WRITER],
  ["ReadWriteOnce", Mode.SINGLE_NODE_MULTI_WRITER],
  ["ReadOnlyMany", Mode.MULTI_NODE_READER_ONLY],
];

export function isBlock(pv: PersistentVolume): boolean {
  return pv.spec.volumeMode === "Block";
}

export function volumeCapability(pv: PersistentVolume): VolumeCapability {
  const modes = pv.spec.accessModes ?? [];
  const mode = PRECEDENCE.find(([name]) => modes.includes(name))?.[1] ?? Mode.UNKNOWN;
  return {
    accessType: isBlock(pv)
      ? { $case: "block", block: {} }
      : { $case: "mount", mount: { fsType: pv.spec.csi?.fsType ?? "", mountFlags: pv.spec.mountOptions ?? [], volumeMountGroup: "" } },
    accessMode: { mode },
  };
}

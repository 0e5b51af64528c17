// reclaimspace.ReclaimSpaceController and ReclaimSpaceNode: a reclaim moves the volume's
// reclaimableBytes out of usedBytes and adds them to reclaimedBytes in the state file. A volume
// without a space record is trimmed but not measured: no usage in the answer, as ceph-csi's
// fstrim-based NodeReclaimSpace answers (the spec makes both usages optional).
import {
  ControllerReclaimSpaceRequest,
  NodeReclaimSpaceRequest,
  type ControllerReclaimSpaceResponse,
  ReclaimSpaceControllerService,
  ReclaimSpaceNodeService,
  type ReclaimSpaceControllerServer,
  type ReclaimSpaceNodeServer,
} from "../proto/gen/reclaimspace/reclaimspace.js";
import { delay } from "./delay.js";
import { admitAddon, lockVolume, stagedVolume, type Driver } from "./driver.js";
import { unary, type RpcEnv } from "./rpc.js";
import { Status, StatusError } from "./status.js";

function reclaim(driver: Driver, volumeId: string): ControllerReclaimSpaceResponse {
  let usage: ControllerReclaimSpaceResponse = { preUsage: undefined, postUsage: undefined };
  driver.store.update((raw) => {
    const space = raw.space?.[volumeId];
    if (!space) return raw;
    const { usedBytes = 0, reclaimableBytes = 0, reclaimedBytes = 0 } = space;
    const post = Math.max(0, usedBytes - reclaimableBytes);
    usage = { preUsage: { usageBytes: usedBytes }, postUsage: { usageBytes: post } };
    const next = { usedBytes: post, reclaimableBytes: 0, reclaimedBytes: reclaimedBytes + (usedBytes - post) };
    return { ...raw, space: { ...raw.space, [volumeId]: next } };
  });
  return usage;
}

export function reclaimSpaceControllerServer(driver: Driver, env: RpcEnv): ReclaimSpaceControllerServer {
  return {
    // Offline: the volume need not be staged here.
    controllerReclaimSpace: unary(env, ReclaimSpaceControllerService.controllerReclaimSpace, ControllerReclaimSpaceRequest, async (req) => {
      admitAddon(driver, "reclaimSpaceOffline", "ReclaimSpace OFFLINE", { volume_id: req.volumeId });
      return reclaim(driver, req.volumeId);
    }),
  };
}

export function reclaimSpaceNodeServer(driver: Driver, env: RpcEnv): ReclaimSpaceNodeServer {
  return {
    // Trimming a staged volume takes the volume's delayMs, under its lock.
    nodeReclaimSpace: unary(env, ReclaimSpaceNodeService.nodeReclaimSpace, NodeReclaimSpaceRequest, async (req, ctx) => {
      // The upstream sidecar sends only the staging path (volume_path empty), so either will do.
      if (req.volumeId !== "" && req.volumePath === "" && req.stagingTargetPath === "") {
        throw new StatusError(Status.INVALID_ARGUMENT, "volume_path or staging_target_path is required");
      }
      const state = admitAddon(driver, "reclaimSpaceOnline", "ReclaimSpace ONLINE", { volume_id: req.volumeId });
      const volume = stagedVolume(state, req.volumeId);
      const release = lockVolume(driver, req.volumeId, volume);
      try {
        await delay(volume.delayMs, ctx.signal);
        return reclaim(driver, req.volumeId);
      } finally {
        release();
      }
    }),
  };
}

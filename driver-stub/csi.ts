// The CSI socket: csi.v1 Identity and the Node subset, as the kubelet would call them. Its purpose
// is to record what arrives (the sidecar must never call here) and to contend for the same
// per-volume lock as NodeHealVolume. It never edits the state file: which volumes are staged is the
// test's decision, and a second writer would race the test's own edits.
import { hostname } from "node:os";
import {
  GetPluginCapabilitiesRequest,
  GetPluginInfoRequest,
  IdentityService,
  NodeGetCapabilitiesRequest,
  NodeGetInfoRequest,
  NodeService,
  NodeServiceCapability_RPC_Type,
  NodeStageVolumeRequest,
  NodeUnstageVolumeRequest,
  ProbeRequest,
  type IdentityServer,
  type NodeServer,
} from "../proto/gen/csi/v1/csi.js";
import { identify, lockVolume, probe, requireField, type Driver } from "./driver.js";
import { unary, type RpcEnv } from "./rpc.js";
import { Status, StatusError } from "./status.js";

export function csiIdentityServer(driver: Driver, env: RpcEnv): IdentityServer {
  return {
    getPluginInfo: unary(env, IdentityService.getPluginInfo, GetPluginInfoRequest, async () => identify(driver.info)),
    // A node-only plugin: no CONTROLLER_SERVICE, no topology.
    getPluginCapabilities: unary(env, IdentityService.getPluginCapabilities, GetPluginCapabilitiesRequest, async () => ({
      capabilities: [],
    })),
    probe: unary(env, IdentityService.probe, ProbeRequest, async () => probe(driver)),
  };
}

/** Stage and unstage hold the lock only while they run: instantly here, but a heal in flight still wins. */
function withVolumeLock(driver: Driver, volumeId: string): void {
  lockVolume(driver, volumeId, driver.store.current().volumes.get(volumeId))();
}

export function csiNodeServer(driver: Driver, env: RpcEnv): NodeServer {
  return {
    nodeStageVolume: unary(env, NodeService.nodeStageVolume, NodeStageVolumeRequest, async (req) => {
      requireField(req.volumeId, "volume_id");
      requireField(req.stagingTargetPath, "staging_target_path");
      if (req.volumeCapability === undefined) {
        throw new StatusError(Status.INVALID_ARGUMENT, "volume_capability is required");
      }
      withVolumeLock(driver, req.volumeId);
      return {};
    }),
    nodeUnstageVolume: unary(env, NodeService.nodeUnstageVolume, NodeUnstageVolumeRequest, async (req) => {
      requireField(req.volumeId, "volume_id");
      requireField(req.stagingTargetPath, "staging_target_path");
      withVolumeLock(driver, req.volumeId);
      return {};
    }),
    nodeGetCapabilities: unary(env, NodeService.nodeGetCapabilities, NodeGetCapabilitiesRequest, async () => ({
      capabilities: [{ type: { $case: "rpc", rpc: { type: NodeServiceCapability_RPC_Type.STAGE_UNSTAGE_VOLUME } } }],
    })),
    nodeGetInfo: unary(env, NodeService.nodeGetInfo, NodeGetInfoRequest, async () => ({
      nodeId: hostname(),
      maxVolumesPerNode: 0,
      accessibleTopology: undefined,
    })),
  };
}

// healer.v1.VolumeHealerNode, driven by the state file.
// Heal outcomes: HEALTHY → NOT_NEEDED (idempotent); ABNORMAL → per the volume's `heal`
// (SUCCEED: HEALED and written back as HEALTHY; FAIL: INTERNAL; NOT_HEALABLE: NOT_HEALABLE);
// UNSUPPORTED → NOT_HEALABLE whatever `heal` says, because UNSUPPORTED means the driver cannot
// check this volume at all, and the healer design review reads it as "this volume does not support
// healing" (a driver cannot repair what it cannot observe).
import {
  NodeGetVolumeHealthRequest,
  NodeHealVolumeRequest,
  NodeHealVolumeResponse_Result as Result,
  VolumeHealerNodeService,
  VolumeHealth_State,
  type NodeHealVolumeResponse,
  type VolumeHealerNodeServer,
  type VolumeHealth,
} from "../proto/gen/healer/v1/healer.js";
import { delay } from "./delay.js";
import { lockVolume, requireCapability, requireField, requireReady, stagedVolume, type Driver } from "./driver.js";
import { unary, type CallContext, type RpcEnv } from "./rpc.js";
import type { CapabilityName, Volume } from "./state.js";
import { Status, StatusError } from "./status.js";

function health(volume: Volume): VolumeHealth {
  return { state: VolumeHealth_State[volume.state], reason: volume.reason, message: volume.message };
}

/**
 * The checks both RPCs share, in a real driver's order (method, arguments, readiness, volume);
 * returns the volume as listed now. `alsoRequired` maps proto field names to their values.
 */
function admit(driver: Driver, capability: CapabilityName, name: string, volumeId: string, alsoRequired: Record<string, string> = {}): Volume {
  const state = driver.store.current();
  requireCapability(state, capability, name);
  requireField(volumeId, "volume_id");
  for (const [field, value] of Object.entries(alsoRequired)) requireField(value, field);
  requireReady(state);
  return stagedVolume(state, volumeId);
}

/** Waits out the volume's delayMs, then looks at the state again: it may have changed meanwhile. */
async function afterDelay(driver: Driver, volumeId: string, volume: Volume, ctx: CallContext): Promise<Volume> {
  if (volume.delayMs <= 0) return volume;
  await delay(volume.delayMs, ctx.signal);
  return stagedVolume(driver.store.current(), volumeId);
}

function heal(driver: Driver, volumeId: string, volume: Volume): NodeHealVolumeResponse {
  if (volume.state === "HEALTHY") {
    return { result: Result.NOT_NEEDED, health: health(volume), message: "volume is healthy" };
  }
  if (volume.state === "UNSUPPORTED") {
    return { result: Result.NOT_HEALABLE, health: health(volume), message: "volume health cannot be checked, so it cannot be healed" };
  }
  switch (volume.heal) {
    case "FAIL":
      throw new StatusError(Status.INTERNAL, `healing volume ${volumeId} failed (state file says heal: FAIL)`);
    case "NOT_HEALABLE":
      return { result: Result.NOT_HEALABLE, health: health(volume), message: "volume cannot be healed" };
    case "SUCCEED":
      driver.store.markHealed(volumeId);
      return {
        result: Result.HEALED,
        health: { state: VolumeHealth_State.HEALTHY, reason: "", message: "" },
        message: "volume healed",
      };
  }
}

export function healerServer(driver: Driver, env: RpcEnv): VolumeHealerNodeServer {
  return {
    // Takes no lock: a health check must answer even while a stage or heal is stuck on the volume.
    nodeGetVolumeHealth: unary(env, VolumeHealerNodeService.nodeGetVolumeHealth, NodeGetVolumeHealthRequest, async (req, ctx) => {
      const volume = admit(driver, "getVolumeHealth", "GET_VOLUME_HEALTH", req.volumeId);
      return { health: health(await afterDelay(driver, req.volumeId, volume, ctx)) };
    }),
    nodeHealVolume: unary(env, VolumeHealerNodeService.nodeHealVolume, NodeHealVolumeRequest, async (req, ctx) => {
      const volume = admit(driver, "healVolume", "HEAL_VOLUME", req.volumeId, {
        staging_target_path: req.stagingTargetPath,
      });
      // Taken synchronously on receipt, so once "recv" is printed the volume is already held.
      const release = lockVolume(driver, req.volumeId, volume);
      try {
        return heal(driver, req.volumeId, await afterDelay(driver, req.volumeId, volume, ctx));
      } finally {
        release();
      }
    }),
  };
}

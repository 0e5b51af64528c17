// healer.v1.VolumeHealerNode, driven by the state file.
// Heal outcomes, as the contract's reasons oblige: DRIVER_RESTARTED and OPERATOR_REQUEST re-make
// the data path even of a HEALTHY volume (HEALED: after a restart a mount that looks alive may
// have lost its daemon); VOLUME_ABNORMAL of a HEALTHY volume → NOT_NEEDED (idempotent). ABNORMAL →
// per the volume's `heal` (SUCCEED: HEALED and written back as HEALTHY; FAIL: INTERNAL;
// NOT_HEALABLE: NOT_HEALABLE); UNSUPPORTED → NOT_HEALABLE whatever `heal` says, because
// UNSUPPORTED means the driver cannot check this volume at all, and the healer design review
// reads it as "this volume does not support healing" (a driver cannot repair what it cannot observe).
// Each target given is answered after the volume's `dataPath` (state.ts says how each reaches
// running pods); a HEALED volume's pods that keep a dead FUSE mount stay RESTART_NEEDED.
import {
  HealReason,
  MountPropagation,
  NodeGetVolumeHealthRequest,
  NodeHealVolumeRequest,
  NodeHealVolumeResponse_Result as Result,
  VolumeHealerNodeService,
  VolumeHealth_State,
  TargetResult_State as TargetState,
  type NodeHealVolumeResponse,
  type PublishTarget,
  type TargetResult,
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
function admit(
  driver: Driver,
  capability: CapabilityName,
  name: string,
  volumeId: string,
  alsoRequired: Record<string, string> = {},
  moreArguments: () => void = () => {},
): Volume {
  const state = driver.store.current();
  requireCapability(state, capability, name);
  requireField(volumeId, "volume_id");
  for (const [field, value] of Object.entries(alsoRequired)) requireField(value, field);
  moreArguments();
  requireReady(state);
  return stagedVolume(state, volumeId);
}

/** Waits out the volume's delayMs, then looks at the state again: it may have changed meanwhile. */
async function afterDelay(driver: Driver, volumeId: string, volume: Volume, ctx: CallContext): Promise<Volume> {
  if (volume.delayMs <= 0) return volume;
  await delay(volume.delayMs, ctx.signal);
  return stagedVolume(driver.store.current(), volumeId);
}

function heal(driver: Driver, req: NodeHealVolumeRequest, volume: Volume): NodeHealVolumeResponse {
  const volumeId = req.volumeId;
  if (volume.state === "UNSUPPORTED") {
    return { result: Result.NOT_HEALABLE, health: health(volume), message: "volume health cannot be checked, so it cannot be healed", targets: [] };
  }
  const remake = req.reason === HealReason.DRIVER_RESTARTED || req.reason === HealReason.OPERATOR_REQUEST;
  if (volume.state === "HEALTHY" && !remake) {
    return { result: Result.NOT_NEEDED, health: health(volume), message: "volume is healthy", targets: req.targets.map((t) => asTheyAre(driver, volume, t)) };
  }
  if (volume.state === "ABNORMAL") {
    switch (volume.heal) {
      case "FAIL":
        throw new StatusError(Status.INTERNAL, `healing volume ${volumeId} failed (state file says heal: FAIL)`);
      case "NOT_HEALABLE":
        return { result: Result.NOT_HEALABLE, health: health(volume), message: "volume cannot be healed", targets: [] };
      case "SUCCEED":
        driver.store.markHealed(volumeId);
    }
  }
  return {
    result: Result.HEALED,
    health: { state: VolumeHealth_State.HEALTHY, reason: "", message: "" },
    message: volume.state === "ABNORMAL" ? "volume healed" : "data path re-established",
    targets: req.targets.map((t) => remade(driver, volume, t)),
  };
}

const answer = (t: PublishTarget, state: TargetState, reason: string, message: string): TargetResult => ({ targetPath: t.targetPath, state, reason, message });
const published = (volume: Volume, t: PublishTarget) => volume.published === undefined || volume.published.includes(t.targetPath);

/** A target after its volume's data path was made again. */
function remade(driver: Driver, volume: Volume, t: PublishTarget): TargetResult {
  if (!published(volume, t)) return answer(t, TargetState.NOT_MOUNTED, "NotPublished", "nothing is published at this target on this node");
  if (volume.dataPath === "reattach") {
    return answer(t, TargetState.WHOLE_IN_PLACE, "DeviceReattached", "the same device is back under the pod's mount");
  }
  const propagated = t.mountPropagation === MountPropagation.HOST_TO_CONTAINER || t.mountPropagation === MountPropagation.BIDIRECTIONAL;
  if (propagated) {
    driver.staleTargets.delete(t.targetPath);
    return answer(t, TargetState.WHOLE_IN_PLACE, "MountPropagated", "the new mount reached the pod's containers through mount propagation");
  }
  driver.staleTargets.add(t.targetPath);
  return answer(
    t,
    TargetState.RESTART_NEEDED,
    "StaleFuseMount",
    "a new FUSE mount was made; the pod's containers mount without HostToContainer propagation and still see the dead one",
  );
}

/** A target of a volume left as it was. */
function asTheyAre(driver: Driver, volume: Volume, t: PublishTarget): TargetResult {
  if (!published(volume, t)) return answer(t, TargetState.NOT_MOUNTED, "NotPublished", "nothing is published at this target on this node");
  if (driver.staleTargets.has(t.targetPath)) {
    return answer(t, TargetState.RESTART_NEEDED, "StaleFuseMount", "the pod's containers still see the FUSE mount that died before the last heal");
  }
  return answer(t, TargetState.WHOLE_IN_PLACE, "NothingToHeal", "the volume is healthy at this target");
}

/** INVALID_ARGUMENT for a reason the contract does not know (0 is a caller that forgot it), or a target without a path. */
function requireHealArguments(req: NodeHealVolumeRequest): void {
  if (!(req.reason in HealReason) || req.reason === HealReason.HEAL_REASON_UNSPECIFIED || req.reason === HealReason.UNRECOGNIZED) {
    throw new StatusError(Status.INVALID_ARGUMENT, `reason is required (one of DRIVER_RESTARTED, VOLUME_ABNORMAL, OPERATOR_REQUEST; got ${req.reason})`);
  }
  req.targets.forEach((t, i) => requireField(t.targetPath, `targets[${i}].target_path`));
}

export function healerServer(driver: Driver, env: RpcEnv): VolumeHealerNodeServer {
  return {
    // Takes no lock: a health check must answer even while a stage or heal is stuck on the volume.
    nodeGetVolumeHealth: unary(env, VolumeHealerNodeService.nodeGetVolumeHealth, NodeGetVolumeHealthRequest, async (req, ctx) => {
      const volume = admit(driver, "getVolumeHealth", "GET_VOLUME_HEALTH", req.volumeId);
      return { health: health(await afterDelay(driver, req.volumeId, volume, ctx)) };
    }),
    nodeHealVolume: unary(env, VolumeHealerNodeService.nodeHealVolume, NodeHealVolumeRequest, async (req, ctx) => {
      const volume = admit(driver, "healVolume", "HEAL_VOLUME", req.volumeId, { staging_target_path: req.stagingTargetPath }, () => requireHealArguments(req));
      // Taken synchronously on receipt, so once "recv" is printed the volume is already held.
      const release = lockVolume(driver, req.volumeId, volume);
      try {
        return heal(driver, req, await afterDelay(driver, req.volumeId, volume, ctx));
      } finally {
        release();
      }
    }),
  };
}

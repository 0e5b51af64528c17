// What every service of the stub shares: who it is, its state, and its per-volume locks,
// plus the checks a real driver makes before it touches a volume.
import type { StateStore } from "./state-store.js";
import type { CapabilityName, ResolvedState, Volume } from "./state.js";
import { VolumeLocks } from "./locks.js";
import { Status, StatusError } from "./status.js";

export interface DriverInfo {
  name: string;
  vendorVersion: string;
  /** Fresh per process start: lets a sidecar tell a restarted driver (whose mounts died) apart. */
  bootId: string;
  /** Not reported (--no-boot-id). */
  hideBootId?: boolean;
}

export interface Driver {
  info: DriverInfo;
  store: StateStore;
  locks: VolumeLocks;
  /** Target paths a FUSE-like heal left with the dead mount: they stay so until their pod goes (a new pod, a new path). */
  staleTargets: Set<string>;
}

/** GetIdentity (addons) and GetPluginInfo (CSI) describe the same driver the same way. */
export function identify(info: DriverInfo): { name: string; vendorVersion: string; manifest: Record<string, string> } {
  return { name: info.name, vendorVersion: info.vendorVersion, manifest: info.hideBootId ? {} : { bootId: info.bootId } };
}

/** Both Probes answer `ready` explicitly: unset also means ready, but callers should not have to know. */
export function probe(driver: Driver): { ready: boolean } {
  return { ready: driver.store.current().ready };
}

/** What a driver without the capability answers; the sidecar checks capabilities first anyway. */
export function requireCapability(state: ResolvedState, capability: CapabilityName, name: string): void {
  if (!state.capabilities[capability]) throw new StatusError(Status.UNIMPLEMENTED, `${name} is switched off in the state file`);
}

/**
 * The checks every upstream CSI-Addons RPC starts with, in a real driver's order: the capability,
 * the required fields (proto field name → value), readiness.
 */
export function admitAddon(driver: Driver, capability: CapabilityName, name: string, required: Record<string, string> = {}): ResolvedState {
  const state = driver.store.current();
  requireCapability(state, capability, name);
  for (const [field, value] of Object.entries(required)) requireField(value, field);
  requireReady(state);
  return state;
}

export function requireField(value: string, field: string): void {
  if (value === "") throw new StatusError(Status.INVALID_ARGUMENT, `${field} is required`);
}

export function requireReady(state: ResolvedState): void {
  if (!state.ready) throw new StatusError(Status.FAILED_PRECONDITION, "driver is not ready");
}

/** A volume the state file does not list is not staged on this node. */
export function stagedVolume(state: ResolvedState, volumeId: string): Volume {
  const volume = state.volumes.get(volumeId);
  if (volume === undefined) throw new StatusError(Status.NOT_FOUND, `volume ${volumeId} is not staged on this node`);
  return volume;
}

/**
 * Takes the volume's operation lock or answers ABORTED. `locked: true` in the state file stands
 * for a NodeStage (of the kubelet) that holds it right now.
 */
export function lockVolume(driver: Driver, volumeId: string, volume: Volume | undefined): () => void {
  const busy = () => new StatusError(Status.ABORTED, `an operation on volume ${volumeId} is already in progress`);
  if (volume?.locked) throw busy();
  const release = driver.locks.tryAcquire(volumeId);
  if (release === undefined) throw busy();
  return release;
}

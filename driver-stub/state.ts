// The state file's shape (DESIGN section 5), its validation, and the defaults that fill it in.
// The upstream services' part of the state lives in addons-state.ts.
// Validation is strict (unknown keys are errors): a typo such as "delayMS" silently ignored would
// make a fault-injection test pass for the wrong reason.
import { ADDONS_KEYS, parseAddons, resolveAddons, type AddonsState, type ResolvedAddons } from "./addons-state.js";
import { isBool, isObject, isString, oneOf, onlyKeys, optional, StateFormatError } from "./validate.js";

export { StateFormatError };

const isDelay = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0;

export type HealthStateName = "HEALTHY" | "ABNORMAL" | "UNSUPPORTED";
export type HealOutcome = "SUCCEED" | "FAIL" | "NOT_HEALABLE";
/**
 * How a re-made data path reaches the pods already running on the volume: "reattach" (rbd-nbd
 * style: the same device comes back under the pods' unchanged mounts, so they recover in place);
 * "fuse" (ceph-fuse style: a new mount is made, which reaches a running container only through
 * HostToContainer or Bidirectional mount propagation; the others keep the dead one).
 */
export type DataPath = "reattach" | "fuse";

export interface VolumeSpec {
  state?: HealthStateName;
  reason?: string;
  message?: string;
  /** What NodeHealVolume does with an ABNORMAL volume; default SUCCEED. */
  heal?: HealOutcome;
  /** Delays NodeGetVolumeHealth and NodeHealVolume (until the call dies). */
  delayMs?: number;
  /** Answers ABORTED as if a NodeStage held the volume's lock. */
  locked?: boolean;
  /** Default "reattach". */
  dataPath?: DataPath;
  /**
   * The target paths published on this node; a heal's target not listed is NOT_MOUNTED. Unset:
   * every target a heal names counts as published (the stub serves no NodePublishVolume to know).
   */
  published?: string[];
}

/**
 * What GetCapabilities offers, and what the services answer UNIMPLEMENTED without. The healer
 * capabilities are on by default (what the stub is for); the upstream CSI-Addons ones are off
 * unless the state file turns them on, so a stub that nobody told to fence or replicate never
 * invites the upstream controller to route such operations to it.
 */
export const CAPABILITY_DEFAULTS = {
  getVolumeHealth: true,
  healVolume: true,
  /** ReclaimSpace OFFLINE: reclaimspace.ReclaimSpaceController. */
  reclaimSpaceOffline: false,
  /** ReclaimSpace ONLINE: reclaimspace.ReclaimSpaceNode. */
  reclaimSpaceOnline: false,
  encryptionKeyRotation: false,
  /** NetworkFence NETWORK_FENCE: Fence/Unfence/ListClusterFence. */
  networkFence: false,
  /** NetworkFence GET_CLIENTS_TO_FENCE. */
  getClientsToFence: false,
  volumeReplication: false,
  /** VolumeReplication GET_REPLICATION_DESTINATION_INFO. */
  replicationDestinationInfo: false,
  /** VolumeGroup VOLUME_GROUP (with MODIFY_VOLUME_GROUP, GET_VOLUME_GROUP, LIST_VOLUME_GROUPS). */
  volumeGroup: false /** Service CONTROLLER_SERVICE: a controller plugin (its sidecars take part in the Lease). */,
  controllerService: false,
};

export type CapabilityName = keyof typeof CAPABILITY_DEFAULTS;
export type Capabilities = Record<CapabilityName, boolean>;

/** The state file as written by tests and people; every field is optional. */
export interface StubState extends AddonsState {
  ready?: boolean;
  capabilities?: Partial<Capabilities>;
  volumes?: Record<string, VolumeSpec>;
}

export type Volume = Required<Omit<VolumeSpec, "published">> & { published: readonly string[] | undefined };

/** The state with every default applied: what the handlers read. */
export interface ResolvedState {
  ready: boolean;
  capabilities: Capabilities;
  volumes: ReadonlyMap<string, Volume>;
  /** The upstream services' state (space, fences, replication, groups), defaults applied. */
  addons: ResolvedAddons;
}

export const HEALTH_STATES: readonly HealthStateName[] = ["HEALTHY", "ABNORMAL", "UNSUPPORTED"];
export const HEAL_OUTCOMES: readonly HealOutcome[] = ["SUCCEED", "FAIL", "NOT_HEALABLE"];
export const DATA_PATHS: readonly DataPath[] = ["reattach", "fuse"];
const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === "string");

function parseVolume(raw: unknown, where: string): VolumeSpec {
  if (!isObject(raw)) throw new StateFormatError(`${where}: expected an object`);
  onlyKeys(raw, ["state", "reason", "message", "heal", "delayMs", "locked", "dataPath", "published"], where);
  return {
    state: optional(raw, "state", where, oneOf(HEALTH_STATES), HEALTH_STATES.join("|")),
    reason: optional(raw, "reason", where, isString, "a string"),
    message: optional(raw, "message", where, isString, "a string"),
    heal: optional(raw, "heal", where, oneOf(HEAL_OUTCOMES), HEAL_OUTCOMES.join("|")),
    delayMs: optional(raw, "delayMs", where, isDelay, "a number >= 0"),
    locked: optional(raw, "locked", where, isBool, "a boolean"),
    dataPath: optional(raw, "dataPath", where, oneOf(DATA_PATHS), DATA_PATHS.join("|")),
    published: optional(raw, "published", where, isStringList, "a list of strings"),
  };
}

/** Parses and validates the file's text; throws StateFormatError naming the offending path. */
export function parseState(text: string): StubState {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new StateFormatError(`not JSON: ${(err as Error).message}`);
  }
  if (!isObject(raw)) throw new StateFormatError("expected a JSON object");
  onlyKeys(raw, ["ready", "capabilities", "volumes", ...ADDONS_KEYS], "state");
  const state: StubState = parseAddons(raw);
  const ready = optional(raw, "ready", "state", isBool, "a boolean");
  if (ready !== undefined) state.ready = ready;
  if (raw.capabilities !== undefined) {
    const caps = raw.capabilities;
    if (!isObject(caps)) throw new StateFormatError("state.capabilities: expected an object");
    const names = Object.keys(CAPABILITY_DEFAULTS) as CapabilityName[];
    onlyKeys(caps, names, "state.capabilities");
    state.capabilities = Object.fromEntries(names.map((n) => [n, optional(caps, n, "state.capabilities", isBool, "a boolean")])) as Partial<Capabilities>;
  }
  if (raw.volumes !== undefined) {
    if (!isObject(raw.volumes)) throw new StateFormatError("state.volumes: expected an object");
    state.volumes = {};
    for (const [id, v] of Object.entries(raw.volumes)) {
      state.volumes[id] = parseVolume(v, `state.volumes[${JSON.stringify(id)}]`);
    }
  }
  return state;
}

// Changes copy only the volume they touch (healVolume), so after a heal every other volume is the
// same object as before: resolving each once keeps a heal burst from re-resolving them all.
const resolvedVolumes = new WeakMap<object, Volume>();

/** One volume with its defaults applied (the same object for the same spec). */
export function resolveVolume(v: VolumeSpec): Volume {
  let resolved = resolvedVolumes.get(v);
  if (!resolved) {
    resolved = {
      state: v.state ?? "HEALTHY",
      reason: v.reason ?? "",
      message: v.message ?? "",
      heal: v.heal ?? "SUCCEED",
      delayMs: v.delayMs ?? 0,
      locked: v.locked ?? false,
      dataPath: v.dataPath ?? "reattach",
      published: v.published,
    };
    resolvedVolumes.set(v, resolved);
  }
  return resolved;
}

/** What resolveState returns: its owner (the state store) may set a volume in place after a heal. */
export interface OwnResolvedState extends ResolvedState {
  volumes: Map<string, Volume>;
}

/** Absent file, absent keys: no volumes, ready, the capabilities of CAPABILITY_DEFAULTS. */
export function resolveState(s: StubState): OwnResolvedState {
  const volumes = new Map<string, Volume>();
  for (const [id, v] of Object.entries(s.volumes ?? {})) volumes.set(id, resolveVolume(v));
  return {
    ready: s.ready ?? true,
    capabilities: Object.fromEntries(Object.entries(CAPABILITY_DEFAULTS).map(([n, on]) => [n, s.capabilities?.[n as CapabilityName] ?? on])) as Capabilities,
    volumes,
    addons: resolveAddons(s),
  };
}

/**
 * Repairs one volume of `s` in place (HEALTHY, its fault reason and message cleared) and returns
 * `s`. In place, because a heal must not cost a copy of every volume: the store owns `s`. The
 * volume itself is a new object, so what resolveVolume made of the old one is not reused.
 */
export function healVolume(s: StubState, volumeId: string): StubState {
  const volumes = (s.volumes ??= {});
  const { reason: _reason, message: _message, ...rest } = volumes[volumeId] ?? {};
  volumes[volumeId] = { ...rest, state: "HEALTHY" };
  return s;
}

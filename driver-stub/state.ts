// The state file's shape (DESIGN section 5), its validation, and the defaults that fill it in.
// Validation is strict (unknown keys are errors): a typo such as "delayMS" silently ignored would
// make a fault-injection test pass for the wrong reason.

export type HealthStateName = "HEALTHY" | "ABNORMAL" | "UNSUPPORTED";
export type HealOutcome = "SUCCEED" | "FAIL" | "NOT_HEALABLE";

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
}

/** The state file as written by tests and people; every field is optional. */
export interface StubState {
  ready?: boolean;
  /** controllerService: identity.GetCapabilities lists Service CONTROLLER_SERVICE (a controller plugin). */
  capabilities?: { getVolumeHealth?: boolean; healVolume?: boolean; controllerService?: boolean };
  volumes?: Record<string, VolumeSpec>;
}

export type Volume = Required<VolumeSpec>;

/** The state with every default applied: what the handlers read. */
export interface ResolvedState {
  ready: boolean;
  capabilities: { getVolumeHealth: boolean; healVolume: boolean; controllerService: boolean };
  volumes: ReadonlyMap<string, Volume>;
}

export const HEALTH_STATES: readonly HealthStateName[] = ["HEALTHY", "ABNORMAL", "UNSUPPORTED"];
export const HEAL_OUTCOMES: readonly HealOutcome[] = ["SUCCEED", "FAIL", "NOT_HEALABLE"];

export class StateFormatError extends Error {}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function onlyKeys(obj: Json, allowed: readonly string[], where: string): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) throw new StateFormatError(`${where}: unknown key "${key}"`);
  }
}

function optional<T>(obj: Json, key: string, where: string, check: (v: unknown) => v is T, expected: string): T | undefined {
  const v = obj[key];
  if (v === undefined) return undefined;
  if (!check(v)) throw new StateFormatError(`${where}.${key}: expected ${expected}, got ${JSON.stringify(v)}`);
  return v;
}

const isBool = (v: unknown): v is boolean => typeof v === "boolean";
const isString = (v: unknown): v is string => typeof v === "string";
const isDelay = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0;
const oneOf =
  <T extends string>(values: readonly T[]) =>
  (v: unknown): v is T =>
    values.includes(v as T);

function parseVolume(raw: unknown, where: string): VolumeSpec {
  if (!isObject(raw)) throw new StateFormatError(`${where}: expected an object`);
  onlyKeys(raw, ["state", "reason", "message", "heal", "delayMs", "locked"], where);
  return {
    state: optional(raw, "state", where, oneOf(HEALTH_STATES), HEALTH_STATES.join("|")),
    reason: optional(raw, "reason", where, isString, "a string"),
    message: optional(raw, "message", where, isString, "a string"),
    heal: optional(raw, "heal", where, oneOf(HEAL_OUTCOMES), HEAL_OUTCOMES.join("|")),
    delayMs: optional(raw, "delayMs", where, isDelay, "a number >= 0"),
    locked: optional(raw, "locked", where, isBool, "a boolean"),
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
  onlyKeys(raw, ["ready", "capabilities", "volumes"], "state");
  const state: StubState = {};
  const ready = optional(raw, "ready", "state", isBool, "a boolean");
  if (ready !== undefined) state.ready = ready;
  if (raw.capabilities !== undefined) {
    const caps = raw.capabilities;
    if (!isObject(caps)) throw new StateFormatError("state.capabilities: expected an object");
    onlyKeys(caps, ["getVolumeHealth", "healVolume", "controllerService"], "state.capabilities");
    state.capabilities = {
      getVolumeHealth: optional(caps, "getVolumeHealth", "state.capabilities", isBool, "a boolean"),
      healVolume: optional(caps, "healVolume", "state.capabilities", isBool, "a boolean"),
      controllerService: optional(caps, "controllerService", "state.capabilities", isBool, "a boolean"),
    };
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

/** Absent file, absent keys: no volumes, ready, every healer capability on, a node plugin (no CONTROLLER_SERVICE). */
export function resolveState(s: StubState): ResolvedState {
  const volumes = new Map<string, Volume>();
  for (const [id, v] of Object.entries(s.volumes ?? {})) {
    volumes.set(id, {
      state: v.state ?? "HEALTHY",
      reason: v.reason ?? "",
      message: v.message ?? "",
      heal: v.heal ?? "SUCCEED",
      delayMs: v.delayMs ?? 0,
      locked: v.locked ?? false,
    });
  }
  return {
    ready: s.ready ?? true,
    capabilities: {
      getVolumeHealth: s.capabilities?.getVolumeHealth ?? true,
      healVolume: s.capabilities?.healVolume ?? true,
      controllerService: s.capabilities?.controllerService ?? false,
    },
    volumes,
  };
}

/** The same state with one volume repaired: HEALTHY, its fault reason and message cleared. */
export function withVolumeHealed(s: StubState, volumeId: string): StubState {
  const volumes = { ...s.volumes };
  const { reason: _reason, message: _message, ...rest } = volumes[volumeId] ?? {};
  volumes[volumeId] = { ...rest, state: "HEALTHY" };
  return { ...s, volumes };
}

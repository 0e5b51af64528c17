// The part of the state file the upstream CSI-Addons services keep (reclaimspace,
// encryptionkeyrotation, fence, replication, volumegroup): what tests and the demo set up, and what
// the stub writes back after each change so they can read it.
import { isBool, isObject, isString, oneOf, onlyKeys, optional, StateFormatError, type Json } from "./validate.js";

/** Space of one volume: a reclaim moves reclaimableBytes out of usedBytes into reclaimedBytes. */
export interface SpaceSpec {
  usedBytes?: number;
  reclaimableBytes?: number;
  reclaimedBytes?: number;
}

/** A storage client GetFenceClients reports (id, and the CIDRs it connects from). */
export interface FenceClientSpec {
  id: string;
  addresses: string[];
}

export type ReplicationRole = "primary" | "secondary";
export const REPLICATION_ROLES: readonly ReplicationRole[] = ["primary", "secondary"];

/** Replication of one source, keyed "volume:<id>" or "volumegroup:<id>". */
export interface ReplicationSpec {
  enabled?: boolean;
  role?: ReplicationRole;
  /** ResyncVolume calls so far. */
  resyncs?: number;
  /** The destination's id when it differs from the source's (GetReplicationDestinationInfo). */
  destination?: string;
  /** ISO 8601; set by every replication change, reported by GetVolumeReplicationInfo. */
  lastSyncTime?: string;
}

export interface GroupSpec {
  name?: string;
  volumeIds?: string[];
  context?: Record<string, string>;
}

export interface AddonsState {
  space?: Record<string, SpaceSpec>;
  /** EncryptionKeyRotate calls per volume. */
  keyRotations?: Record<string, number>;
  /** CIDRs fenced now, in the order they were fenced. */
  fenced?: string[];
  fenceClients?: FenceClientSpec[];
  replication?: Record<string, ReplicationSpec>;
  /** Volume groups by volume_group_id. */
  groups?: Record<string, GroupSpec>;
}

export const ADDONS_KEYS = ["space", "keyRotations", "fenced", "fenceClients", "replication", "groups"] as const;

export interface ResolvedAddons {
  space: Record<string, Required<SpaceSpec>>;
  keyRotations: Record<string, number>;
  fenced: string[];
  fenceClients: FenceClientSpec[];
  replication: Record<string, Required<ReplicationSpec>>;
  groups: Record<string, Required<GroupSpec>>;
}

const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every(isString);
const isStringMap = (v: unknown): v is Record<string, string> => isObject(v) && Object.values(v).every(isString);

function mapOf<T>(raw: Json, key: string, entry: (v: unknown, where: string) => T): Record<string, T> | undefined {
  const v = raw[key];
  if (v === undefined) return undefined;
  if (!isObject(v)) throw new StateFormatError(`state.${key}: expected an object`);
  return Object.fromEntries(Object.entries(v).map(([id, e]) => [id, entry(e, `state.${key}[${JSON.stringify(id)}]`)]));
}

function object(v: unknown, where: string, keys: readonly string[]): Json {
  if (!isObject(v)) throw new StateFormatError(`${where}: expected an object`);
  onlyKeys(v, keys, where);
  return v;
}

/** Omits undefined members, so a parsed state writes back exactly as it was read. */
function defined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

export function parseAddons(raw: Json): AddonsState {
  const space = mapOf(raw, "space", (v, where) => {
    const o = object(v, where, ["usedBytes", "reclaimableBytes", "reclaimedBytes"]);
    return defined({
      usedBytes: optional(o, "usedBytes", where, isCount, "a byte count"),
      reclaimableBytes: optional(o, "reclaimableBytes", where, isCount, "a byte count"),
      reclaimedBytes: optional(o, "reclaimedBytes", where, isCount, "a byte count"),
    });
  });
  const keyRotations = mapOf(raw, "keyRotations", (v, where) => {
    if (!isCount(v)) throw new StateFormatError(`${where}: expected a count`);
    return v;
  });
  const fenced = optional(raw, "fenced", "state", isStrings, "an array of CIDR strings");
  let fenceClients: FenceClientSpec[] | undefined;
  if (raw.fenceClients !== undefined) {
    if (!Array.isArray(raw.fenceClients)) throw new StateFormatError("state.fenceClients: expected an array");
    fenceClients = raw.fenceClients.map((v, i) => {
      const where = `state.fenceClients[${i}]`;
      const o = object(v, where, ["id", "addresses"]);
      return { id: optional(o, "id", where, isString, "a string") ?? "", addresses: optional(o, "addresses", where, isStrings, "an array of strings") ?? [] };
    });
  }
  const replication = mapOf(raw, "replication", (v, where) => {
    const o = object(v, where, ["enabled", "role", "resyncs", "destination", "lastSyncTime"]);
    return defined({
      enabled: optional(o, "enabled", where, isBool, "a boolean"),
      role: optional(o, "role", where, oneOf(REPLICATION_ROLES), REPLICATION_ROLES.join("|")),
      resyncs: optional(o, "resyncs", where, isCount, "a count"),
      destination: optional(o, "destination", where, isString, "a string"),
      lastSyncTime: optional(o, "lastSyncTime", where, isString, "an ISO 8601 time"),
    });
  });
  const groups = mapOf(raw, "groups", (v, where) => {
    const o = object(v, where, ["name", "volumeIds", "context"]);
    return defined({
      name: optional(o, "name", where, isString, "a string"),
      volumeIds: optional(o, "volumeIds", where, isStrings, "an array of strings"),
      context: optional(o, "context", where, isStringMap, "an object of strings"),
    });
  });
  return defined({ space, keyRotations, fenced, fenceClients, replication, groups });
}

export function resolveAddons(s: AddonsState): ResolvedAddons {
  const each = <T, R>(m: Record<string, T> | undefined, f: (v: T) => R) => Object.fromEntries(Object.entries(m ?? {}).map(([k, v]) => [k, f(v)]));
  return {
    space: each(s.space, (v) => ({ usedBytes: v.usedBytes ?? 0, reclaimableBytes: v.reclaimableBytes ?? 0, reclaimedBytes: v.reclaimedBytes ?? 0 })),
    keyRotations: { ...s.keyRotations },
    fenced: [...(s.fenced ?? [])],
    fenceClients: [...(s.fenceClients ?? [])],
    replication: each(s.replication, (v) => ({
      enabled: v.enabled ?? false,
      role: v.role ?? "primary",
      resyncs: v.resyncs ?? 0,
      destination: v.destination ?? "",
      lastSyncTime: v.lastSyncTime ?? "",
    })),
    groups: each(s.groups, (v) => ({ name: v.name ?? "", volumeIds: v.volumeIds ?? [], context: v.context ?? {} })),
  };
}

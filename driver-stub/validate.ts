// Strict validation helpers for the state file: unknown keys and wrong types are errors naming
// the offending path, never silently ignored.
export class StateFormatError extends Error {}

export type Json = Record<string, unknown>;

export function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function onlyKeys(obj: Json, allowed: readonly string[], where: string): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) throw new StateFormatError(`${where}: unknown key "${key}"`);
  }
}

export function optional<T>(obj: Json, key: string, where: string, check: (v: unknown) => v is T, expected: string): T | undefined {
  const v = obj[key];
  if (v === undefined) return undefined;
  if (!check(v)) throw new StateFormatError(`${where}.${key}: expected ${expected}, got ${JSON.stringify(v)}`);
  return v;
}

export const isBool = (v: unknown): v is boolean => typeof v === "boolean";
export const isString = (v: unknown): v is string => typeof v === "string";
export const oneOf =
  <T extends string>(values: readonly T[]) =>
  (v: unknown): v is T =>
    values.includes(v as T);

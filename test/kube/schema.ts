// A structural-schema engine for CRD openAPIV3Schema, in the order the real API server applies it:
// prune (unknown fields, nulls of non-nullable fields), default, validate, then the transition rule
// `self == oldSelf` on update. It is written for the schemas CRDs actually use; checkSchema refuses
// at CRD creation anything it would otherwise silently not enforce (other CEL rules, $ref, ...).
import { clone, deepEqual, isObject, type Obj } from "./json.js";
import type { FieldError } from "./status.js";

export interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: boolean | Schema;
  enum?: unknown[];
  nullable?: boolean;
  default?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minProperties?: number;
  maxProperties?: number;
  allOf?: Schema[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  not?: Schema;
  $ref?: string;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-embedded-resource"?: boolean;
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  "x-kubernetes-list-map-keys"?: string[];
  "x-kubernetes-validations"?: { rule: string; message?: string; messageExpression?: string; reason?: string; fieldPath?: string }[];
  [other: string]: unknown;
}

const SUPPORTED_RULE = "self==oldSelf";
const normRule = (r: string) => r.replace(/\s+/g, "");
const typeName = (v: unknown) =>
  v === null ? "null" : Array.isArray(v) ? "array" : typeof v === "number" ? (Number.isInteger(v) ? "integer" : "number") : typeof v;
const child = (path: string, key: string) => (path ? `${path}.${key}` : key);
const objectLike = (s: Schema) => s.type === "object" || (s.type === undefined && (s.properties !== undefined || s.additionalProperties !== undefined));

function childSchema(s: Schema, key: string): Schema | undefined {
  if (s.properties?.[key]) return s.properties[key];
  return isObject(s.additionalProperties) ? (s.additionalProperties as Schema) : undefined;
}

const keepsUnknown = (s: Schema) => s["x-kubernetes-preserve-unknown-fields"] === true || s.additionalProperties === true;

/**
 * Removes what a structural schema does not declare, and nulls of non-nullable fields, then
 * applies defaults. Mutates `value`; returns the paths of dropped unknown fields (for
 * fieldValidation=Warn/Strict). At the root, apiVersion, kind and metadata always stay.
 */
export function pruneAndDefault(value: unknown, s: Schema, path = "", root = true): string[] {
  const dropped: string[] = [];
  if (s["x-kubernetes-int-or-string"]) return dropped;
  if (Array.isArray(value) && s.items) {
    value.forEach((item, i) => dropped.push(...pruneAndDefault(item, s.items!, `${path}[${i}]`, false)));
    return dropped;
  }
  if (!isObject(value) || !objectLike(s)) return dropped;
  const alwaysKept = root || s["x-kubernetes-embedded-resource"] ? ["apiVersion", "kind", "metadata"] : [];
  for (const key of Object.keys(value)) {
    if (alwaysKept.includes(key)) continue;
    const cs = childSchema(s, key);
    if (value[key] === null && !cs?.nullable) {
      delete value[key];
      continue;
    }
    if (!cs) {
      if (!keepsUnknown(s)) {
        delete value[key];
        dropped.push(child(path, key));
      }
      continue;
    }
    dropped.push(...pruneAndDefault(value[key], cs, child(path, key), false));
  }
  for (const [key, cs] of Object.entries(s.properties ?? {})) {
    if (value[key] === undefined && cs.default !== undefined) {
      value[key] = clone(cs.default);
      pruneAndDefault(value[key], cs, child(path, key), false);
    }
  }
  return dropped;
}

const NO_OLD = Symbol("no old value");
type Old = unknown | typeof NO_OLD;

function typeOk(v: unknown, s: Schema): boolean {
  if (s["x-kubernetes-int-or-string"]) return (typeof v === "number" && Number.isInteger(v)) || typeof v === "string";
  if (v === null) return s.nullable === true;
  switch (s.type) {
    case undefined:
      return true;
    case "object":
      return isObject(v);
    case "array":
      return Array.isArray(v);
    case "string":
      return typeof v === "string";
    case "boolean":
      return typeof v === "boolean";
    case "integer":
      return typeof v === "number" && Number.isInteger(v);
    case "number":
      return typeof v === "number";
    default:
      return false;
  }
}

function scalarChecks(v: unknown, s: Schema, path: string, errs: FieldError[]): void {
  const bad = (detail: string) => errs.push({ type: "FieldValueInvalid", field: path, badValue: v, detail: `${path} in body ${detail}` });
  if (s.enum && !s.enum.some((e) => deepEqual(e, v)))
    errs.push({ type: "FieldValueNotSupported", field: path, badValue: v, detail: `supported values: ${s.enum.map((e) => JSON.stringify(e)).join(", ")}` });
  if (typeof v === "string") {
    if (s.minLength !== undefined && [...v].length < s.minLength) bad(`should be at least ${s.minLength} chars long`);
    if (s.maxLength !== undefined && [...v].length > s.maxLength)
      errs.push({ type: "FieldValueTooLong", field: path, detail: `may not be more than ${s.maxLength} bytes` });
    if (s.pattern !== undefined && !new RegExp(s.pattern, "u").test(v)) bad(`should match '${s.pattern}'`);
    if (s.format === "date-time" && Number.isNaN(Date.parse(v))) bad("must be of type date-time");
  }
  if (typeof v === "number") {
    if (s.minimum !== undefined && (s.exclusiveMinimum ? v <= s.minimum : v < s.minimum))
      bad(`should be greater than ${s.exclusiveMinimum ? "" : "or equal to "}${s.minimum}`);
    if (s.maximum !== undefined && (s.exclusiveMaximum ? v >= s.maximum : v > s.maximum))
      bad(`should be less than ${s.exclusiveMaximum ? "" : "or equal to "}${s.maximum}`);
    if (s.multipleOf !== undefined && v % s.multipleOf !== 0) bad(`should be a multiple of ${s.multipleOf}`);
  }
}

/** Items of a list-type=map correlate with old items by their key fields; other lists do not. */
function oldItem(item: unknown, old: Old, s: Schema): Old {
  const keys = s["x-kubernetes-list-map-keys"];
  if (s["x-kubernetes-list-type"] !== "map" || !keys || !Array.isArray(old) || !isObject(item)) return NO_OLD;
  const found = old.find((o) => isObject(o) && keys.every((k) => deepEqual(o[k], item[k])));
  return found === undefined ? NO_OLD : found;
}

function arrayChecks(v: unknown[], s: Schema, path: string, old: Old, errs: FieldError[]): void {
  if (s.minItems !== undefined && v.length < s.minItems)
    errs.push({ type: "FieldValueInvalid", field: path, badValue: v.length, detail: `${path} in body should have at least ${s.minItems} items` });
  if (s.maxItems !== undefined && v.length > s.maxItems)
    errs.push({ type: "FieldValueTooMany", field: path, badValue: v.length, detail: `must have at most ${s.maxItems} items` });
  const listType = s["x-kubernetes-list-type"];
  const keys = s["x-kubernetes-list-map-keys"] ?? [];
  const identity = (x: unknown) => (listType === "map" && isObject(x) ? JSON.stringify(keys.map((k) => x[k])) : JSON.stringify(x));
  if (s.uniqueItems || listType === "set" || listType === "map") {
    const seen = new Set<string>();
    v.forEach((x, i) => {
      const id = identity(x);
      if (seen.has(id)) errs.push({ type: "FieldValueDuplicate", field: `${path}[${i}]`, badValue: x });
      seen.add(id);
    });
  }
  if (s.items) v.forEach((x, i) => validateNode(x, s.items!, `${path}[${i}]`, oldItem(x, old, s), errs));
}

function objectChecks(v: Obj, s: Schema, path: string, old: Old, errs: FieldError[], root: boolean): void {
  for (const r of s.required ?? []) if (v[r] === undefined) errs.push({ type: "FieldValueRequired", field: child(path, r) });
  const n = Object.keys(v).length;
  if (s.minProperties !== undefined && n < s.minProperties)
    errs.push({ type: "FieldValueInvalid", field: path, badValue: n, detail: `${path} in body should have at least ${s.minProperties} properties` });
  if (s.maxProperties !== undefined && n > s.maxProperties)
    errs.push({ type: "FieldValueTooMany", field: path, badValue: n, detail: `must have at most ${s.maxProperties} items` });
  for (const [key, val] of Object.entries(v)) {
    if (root && key === "metadata") continue; // ObjectMeta is validated by meta.ts, as the real server does.
    const cs = childSchema(s, key);
    if (!cs || val === undefined) continue;
    const o = old !== NO_OLD && isObject(old) && old[key] !== undefined ? old[key] : NO_OLD;
    validateNode(val, cs, child(path, key), o, errs);
  }
}

function combinatorChecks(v: unknown, s: Schema, path: string, errs: FieldError[]): void {
  const passes = (sub: Schema) => {
    const e: FieldError[] = [];
    validateNode(v, sub, path, NO_OLD, e);
    return e.length === 0;
  };
  const fail = (detail: string) => errs.push({ type: "FieldValueInvalid", field: path, badValue: v, detail });
  for (const sub of s.allOf ?? []) validateNode(v, sub, path, NO_OLD, errs);
  if (s.anyOf && !s.anyOf.some(passes)) fail("must validate at least one schema (anyOf)");
  if (s.oneOf && s.oneOf.filter(passes).length !== 1) fail("must validate one and only one schema (oneOf)");
  if (s.not && passes(s.not)) fail("must not validate the schema (not)");
}

function transitionRules(v: unknown, s: Schema, path: string, old: Old, errs: FieldError[]): void {
  if (old === NO_OLD) return; // transition rules only run where an old value correlates
  for (const rule of s["x-kubernetes-validations"] ?? []) {
    if (normRule(rule.rule) !== SUPPORTED_RULE || deepEqual(v, old)) continue;
    const field = rule.fieldPath ? `${path}${rule.fieldPath}` : path;
    const type = (rule.reason as FieldError["type"] | undefined) ?? "FieldValueInvalid";
    errs.push({ type, field, badValue: s.type ?? typeName(v), detail: rule.message ?? `failed rule: ${rule.rule}` });
  }
}

function validateNode(v: unknown, s: Schema, path: string, old: Old, errs: FieldError[], root = false): void {
  if (!typeOk(v, s)) {
    const want = s["x-kubernetes-int-or-string"] ? "integer or string" : s.type;
    errs.push({ type: "FieldValueTypeInvalid", field: path, badValue: typeName(v), detail: `${path} in body must be of type ${want}: "${typeName(v)}"` });
    return;
  }
  if (v === null) return;
  scalarChecks(v, s, path, errs);
  if (Array.isArray(v)) arrayChecks(v, s, path, old, errs);
  else if (isObject(v)) objectChecks(v, s, path, old, errs, root);
  combinatorChecks(v, s, path, errs);
  transitionRules(v, s, path, old, errs);
}

/** Validates a (pruned, defaulted) object; `old` is the stored object on update, for transition rules. */
export function validateWithSchema(obj: Obj, s: Schema, old?: Obj): FieldError[] {
  const errs: FieldError[] = [];
  validateNode(obj, s, "", old === undefined ? NO_OLD : old, errs, true);
  return errs;
}

// ---- CRD-time checks: refuse what this engine would not enforce ----

const knownKeys = new Set([
  "type",
  "properties",
  "required",
  "items",
  "additionalProperties",
  "enum",
  "nullable",
  "default",
  "format",
  "pattern",
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "minItems",
  "maxItems",
  "uniqueItems",
  "minProperties",
  "maxProperties",
  "allOf",
  "anyOf",
  "oneOf",
  "not",
  "description",
  "title",
  "example",
  "externalDocs",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-int-or-string",
  "x-kubernetes-embedded-resource",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-map-type",
  "x-kubernetes-validations",
]);
const types = ["object", "array", "string", "integer", "number", "boolean"];

/** Structural-schema rules (a subset of apiextensions' validation) plus "only what we enforce". */
export function checkSchema(s: Schema, path: string, nested = false): FieldError[] {
  const errs: FieldError[] = [];
  const at = (k: string) => `${path}.${k}`;
  for (const k of Object.keys(s))
    if (!knownKeys.has(k) && s[k] !== undefined)
      errs.push({ type: "FieldValueForbidden", field: at(k), detail: `${k} is not supported by this in-memory API server` });
  const open = s["x-kubernetes-int-or-string"] || s["x-kubernetes-preserve-unknown-fields"];
  if (!s.type && !open && !nested) errs.push({ type: "FieldValueRequired", field: at("type"), detail: "must not be empty for specified object fields" });
  if (s.type && !types.includes(s.type))
    errs.push({ type: "FieldValueNotSupported", field: at("type"), badValue: s.type, detail: `supported values: ${types.map((t) => `"${t}"`).join(", ")}` });
  if (s.type === "array" && !s.items && !nested) errs.push({ type: "FieldValueRequired", field: at("items"), detail: "must be specified" });
  if (s.properties && isObject(s.additionalProperties))
    errs.push({ type: "FieldValueForbidden", field: at("additionalProperties"), detail: "additionalProperties and properties are mutual exclusive" });
  if (s["x-kubernetes-list-type"] === "map" && !s["x-kubernetes-list-map-keys"]?.length)
    errs.push({ type: "FieldValueRequired", field: at("x-kubernetes-list-map-keys"), detail: "must not be empty if x-kubernetes-list-type is map" });
  (s["x-kubernetes-validations"] ?? []).forEach((r, i) => {
    const p = `${at("x-kubernetes-validations")}[${i}]`;
    if (normRule(r.rule ?? "") !== SUPPORTED_RULE)
      errs.push({
        type: "FieldValueForbidden",
        field: `${p}.rule`,
        detail: `this in-memory API server implements only the CEL rule "self == oldSelf"; refusing "${r.rule}" rather than not enforcing it`,
      });
    if (r.messageExpression)
      errs.push({ type: "FieldValueForbidden", field: `${p}.messageExpression`, detail: "messageExpression is not supported by this in-memory API server" });
  });
  for (const [k, ps] of Object.entries(s.properties ?? {})) errs.push(...checkSchema(ps, `${path}.properties[${k}]`, nested));
  if (s.items) errs.push(...checkSchema(s.items, at("items"), nested));
  if (isObject(s.additionalProperties)) errs.push(...checkSchema(s.additionalProperties as Schema, at("additionalProperties"), nested));
  for (const k of ["allOf", "anyOf", "oneOf"] as const) (s[k] ?? []).forEach((sub, i) => errs.push(...checkSchema(sub, `${at(k)}[${i}]`, true)));
  if (s.not) errs.push(...checkSchema(s.not, at("not"), true));
  return errs;
}

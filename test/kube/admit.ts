// The checks every write goes through before it reaches storage, in the real server's order:
// type meta and namespace of the body against the URL (400), normalisation, pruning and
// defaulting, then validation of ObjectMeta and of the schema (422). Custom resources use their
// CRD schema; built-ins use kubernetes-models' schemas.
import { deepEqual, isObject, metaOf, type Obj } from "./json.js";
import { validateObjectMeta } from "./meta.js";
import { apiVersionOf, groupKind, type ResourceType } from "./resources.js";
import { pruneAndDefault, validateWithSchema } from "./schema.js";
import { ApiError, badRequest, type FieldError, invalidObject } from "./status.js";

export type FieldValidation = "Strict" | "Warn" | "Ignore";

export function parseFieldValidation(v: string | null | undefined): FieldValidation {
  if (!v || v === "Warn") return "Warn";
  if (v === "Strict" || v === "Ignore") return v;
  throw badRequest(`fieldValidation must be one of "Ignore", "Warn" or "Strict", got "${v}"`);
}

/** apiVersion/kind of a body against the endpoint. Custom resources must carry both. */
export function checkTypeMeta(t: ResourceType, body: unknown): Obj {
  if (!isObject(body)) throw badRequest("the body of the request must be a JSON object");
  const want = apiVersionOf(t);
  if (t.custom && (!body.kind || !body.apiVersion)) {
    const missing = !body.kind ? "Kind" : "APIVersion";
    throw badRequest(`Object '${missing}' is missing in '${JSON.stringify(body)}'`);
  }
  if (body.apiVersion !== undefined && body.apiVersion !== want)
    throw badRequest(`the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${want})`);
  if (body.kind !== undefined && body.kind !== t.kind)
    throw badRequest(`the kind in the data (${String(body.kind)}) does not match the expected kind (${t.kind})`);
  body.apiVersion = want;
  body.kind = t.kind;
  if (body.metadata !== undefined && !isObject(body.metadata)) throw badRequest("metadata must be an object");
  return body;
}

/** Namespaced objects take the URL's namespace (a different one in the body is a 400); others none. */
export function checkNamespace(t: ResourceType, body: Obj, ns: string | undefined): void {
  const meta = metaOf(body);
  if (!t.namespaced) {
    delete meta.namespace;
    return;
  }
  if (meta.namespace && meta.namespace !== ns) throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
  meta.namespace = ns;
}

/**
 * Prunes, defaults and validates `obj` for storage (mutating it). `old` is the stored object on
 * update (transition rules). Returns warning texts for fieldValidation=Warn.
 */
export function admit(t: ResourceType, obj: Obj, old: Obj | undefined, fv: FieldValidation): string[] {
  t.normalize?.(obj);
  const errs: FieldError[] = validateObjectMeta(metaOf(obj), t.nameRule, t.namespaced);
  let dropped: string[] = [];
  if (t.custom) {
    dropped = pruneAndDefault(obj, t.custom.schema);
    errs.push(...validateWithSchema(obj, t.custom.schema, old));
  } else if (t.validate) {
    errs.push(...t.validate(obj));
  }
  if (dropped.length > 0 && fv === "Strict") throw badRequest(`strict decoding error: ${dropped.map((f) => `unknown field "${f}"`).join(", ")}`);
  if (errs.length > 0) throw invalidObject(groupKind(t), String(metaOf(obj).name ?? ""), dedupe(errs));
  return fv === "Warn" ? dropped.map((f) => `unknown field "${f}"`) : [];
}

function dedupe(errs: FieldError[]): FieldError[] {
  const seen = new Set<string>();
  return errs.filter((e) => {
    const k = JSON.stringify(e);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** The part of an object whose change bumps metadata.generation. */
function generationRelevant(t: ResourceType, o: Obj): Obj {
  const { metadata: _m, status, ...rest } = o;
  return t.statusSubresource ? rest : { ...rest, status };
}

export function nextGeneration(t: ResourceType, next: Obj, old: Obj): number | undefined {
  if (!t.tracksGeneration) return metaOf(old).generation as number | undefined;
  const g = Number(metaOf(old).generation ?? 1);
  return deepEqual(generationRelevant(t, next), generationRelevant(t, old)) ? g : g + 1;
}

/** The 422 a custom resource PUT without metadata.resourceVersion gets (no unconditional updates). */
export function unconditionalUpdateRefused(t: ResourceType, name: string): ApiError {
  return invalidObject(groupKind(t), name, [{ type: "FieldValueInvalid", field: "metadata.resourceVersion", detail: "0x0: must be specified for an update" }]);
}

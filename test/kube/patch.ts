// PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and, for built-in kinds only,
// strategic merge patch (strategic-merge.ts; see README). Custom resources refuse
// strategic merge with 415, as the real server does; server-side apply is not implemented (415).
import { clone, deepEqual, isObject, type Obj } from "./json.js";
import { ApiError, badRequest, unsupportedMediaType } from "./status.js";
import { strategicMerge } from "./strategic-merge.js";

export const MERGE = "application/merge-patch+json";
export const JSON_PATCH = "application/json-patch+json";
export const STRATEGIC = "application/strategic-merge-patch+json";
export const APPLY = "application/apply-patch+yaml";

export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const out: Obj = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

const unescape = (s: string) => s.replace(/~1/g, "/").replace(/~0/g, "~");

function resolve(doc: unknown, pointer: string): { parent: unknown; key: string } {
  if (pointer === "") return { parent: undefined, key: "" };
  if (!pointer.startsWith("/")) throw badRequest(`the server rejected our request due to an error in our request: invalid JSON pointer "${pointer}"`);
  const segs = pointer.slice(1).split("/").map(unescape);
  let parent: unknown = doc;
  for (const seg of segs.slice(0, -1)) {
    parent = Array.isArray(parent) ? parent[Number(seg)] : isObject(parent) ? parent[seg] : undefined;
    if (parent === undefined) throw badRequest(`the server rejected our request due to an error in our request: missing path "${pointer}"`);
  }
  return { parent, key: segs[segs.length - 1]! };
}

function get(doc: unknown, pointer: string): unknown {
  if (pointer === "") return doc;
  const { parent, key } = resolve(doc, pointer);
  const v = Array.isArray(parent) ? parent[Number(key)] : isObject(parent) ? parent[key] : undefined;
  if (v === undefined) throw badRequest(`the server rejected our request due to an error in our request: missing value at "${pointer}"`);
  return v;
}

function remove(doc: unknown, pointer: string): unknown {
  const { parent, key } = resolve(doc, pointer);
  const v = get(doc, pointer);
  if (Array.isArray(parent)) parent.splice(Number(key), 1);
  else delete (parent as Obj)[key];
  return v;
}

function add(doc: unknown, pointer: string, value: unknown, replace: boolean): unknown {
  if (pointer === "") return value;
  const { parent, key } = resolve(doc, pointer);
  if (Array.isArray(parent)) {
    const i = key === "-" ? parent.length : Number(key);
    if (!Number.isInteger(i) || i < 0 || i > parent.length)
      throw badRequest(`the server rejected our request due to an error in our request: index out of range at "${pointer}"`);
    parent.splice(i, replace ? 1 : 0, value);
  } else if (isObject(parent)) parent[key] = value;
  else throw badRequest(`the server rejected our request due to an error in our request: missing path "${pointer}"`);
  return doc;
}

export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw badRequest("the server rejected our request due to an error in our request: a JSON patch must be a list of operations");
  let doc = clone(target);
  for (const op of ops as Obj[]) {
    const path = String(op.path ?? "");
    switch (op.op) {
      case "add":
        doc = add(doc, path, clone(op.value), false);
        break;
      case "replace":
        get(doc, path);
        doc = add(doc, path, clone(op.value), true);
        break;
      case "remove":
        remove(doc, path);
        break;
      case "move":
        doc = add(doc, path, remove(doc, String(op.from)), false);
        break;
      case "copy":
        doc = add(doc, path, clone(get(doc, String(op.from))), false);
        break;
      case "test":
        if (!deepEqual(get(doc, path), op.value))
          throw new ApiError({
            kind: "Status",
            apiVersion: "v1",
            metadata: {},
            status: "Failure",
            message: `the server rejected our request due to an error in our request: testing value ${path} failed`,
            reason: "Invalid",
            code: 422,
          });
        break;
      default:
        throw badRequest(`the server rejected our request due to an error in our request: unexpected kind of operation "${String(op.op)}"`);
    }
  }
  return doc;
}

/** Applies a PATCH body of `contentType` to `current`; `custom` = custom resource (no strategic merge). */
export function applyPatch(current: Obj, body: unknown, contentType: string, custom: boolean): Obj {
  const type = contentType.split(";")[0]!.trim();
  const accepted = custom ? [JSON_PATCH, MERGE, APPLY] : [JSON_PATCH, MERGE, STRATEGIC, APPLY];
  let out: unknown;
  if (type === MERGE) out = mergePatch(current, body);
  else if (type === JSON_PATCH) out = jsonPatch(current, body);
  else if (type === STRATEGIC && !custom) out = strategicMerge(current, body);
  else throw unsupportedMediaType(type, type === APPLY ? accepted.filter((t) => t !== APPLY) : accepted);
  if (!isObject(out)) throw badRequest("the server rejected our request due to an error in our request: patch did not produce an object");
  return out;
}

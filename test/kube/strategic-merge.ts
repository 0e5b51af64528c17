// Strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch) for the built-in kinds, as
// `kubectl patch` (its default type) sends it. The real server takes each list's merge key from
// the Go types' patchMergeKey tags; here they come from the field's name, which is what those tags
// say for the lists of a pod template, a Service and object metadata (MERGE_KEYS). Every other list
// is replaced whole, as a list without a merge strategy is. Directives: `$patch: delete` in a list
// item removes the item, `$patch: replace` in a map or as a list item replaces it; the rest
// ($setElementOrder, $retainKeys, $deleteFromPrimitiveList) are dropped (see README).
import { clone, isObject, type Obj } from "./json.js";
import { badRequest } from "./status.js";

/** patchMergeKey of the lists with patchStrategy "merge", by field name. */
const MERGE_KEYS: Record<string, string | ((item: Obj) => string)> = {
  containers: "name",
  initContainers: "name",
  ephemeralContainers: "name",
  volumes: "name",
  volumeMounts: "mountPath",
  volumeDevices: "devicePath",
  env: "name",
  imagePullSecrets: "name",
  hostAliases: "ip",
  resourceClaims: "name",
  // A container's ports merge on containerPort, a Service's on port.
  ports: (item) => ("containerPort" in item ? "containerPort" : "port"),
  ownerReferences: "uid",
  conditions: "type",
};

const keyOf = (field: string, item: Obj): string | undefined => {
  const k = MERGE_KEYS[field];
  return typeof k === "function" ? k(item) : k;
};

export function strategicMerge(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  if (patch.$patch === "replace") return withoutDirectives(patch);
  if (patch.$patch !== undefined)
    throw badRequest(`the server rejected our request due to an error in our request: unknown patch type: ${String(patch.$patch)} in map`);
  const out: Obj = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith("$")) continue;
    if (v === null) delete out[k];
    else if (Array.isArray(v) && MERGE_KEYS[k] !== undefined) out[k] = mergeList(k, Array.isArray(out[k]) ? (out[k] as unknown[]) : [], v);
    else out[k] = isObject(v) ? strategicMerge(out[k], v) : clone(v);
  }
  return out;
}

/** A list with a merge key: items matched by key are merged, new ones added, in the server's order. */
function mergeList(field: string, original: unknown[], patch: unknown[]): unknown[] {
  if (patch.some((p) => isObject(p) && p.$patch === "replace")) return patch.filter((p) => !(isObject(p) && p.$patch === "replace")).map(withoutDirectives);
  const key = (item: unknown) => (isObject(item) ? keyOf(field, item) : undefined);
  const same = (a: unknown, b: unknown) => isObject(a) && isObject(b) && key(b) !== undefined && a[key(b)!] === b[key(b)!];
  for (const p of patch) {
    if (!isObject(p) || key(p) === undefined || p[key(p)!] === undefined)
      throw badRequest(
        `the server rejected our request due to an error in our request: map: ${JSON.stringify(p)} does not contain declared merge key: ${key(p) ?? "name"}`,
      );
  }
  let merged = clone(original);
  const patched: unknown[] = [];
  for (const p of patch as Obj[]) {
    const i = merged.findIndex((o) => same(o, p));
    if (p.$patch === "delete") {
      if (i >= 0) merged.splice(i, 1);
      continue;
    }
    const item = i >= 0 ? strategicMerge(merged[i], p) : withoutDirectives(p);
    if (i >= 0) merged[i] = item;
    else merged = [...merged, item];
    patched.push(item);
  }
  // normalizeElementOrder: the patch's items in patch order and the others in the server's order,
  // interleaved by their positions in the server's list (an item the server did not have sorts
  // after the server-only item it is compared with).
  const serverOnly = merged.filter((m) => !patched.includes(m));
  const at = (item: unknown) => original.findIndex((o) => same(o, item));
  const out: unknown[] = [];
  let [i, j] = [0, 0];
  while (i < patched.length || j < serverOnly.length) {
    const [l, r] = [patched[i], serverOnly[j]];
    if (j >= serverOnly.length || (i < patched.length && at(l) >= 0 && at(r) >= 0 && at(l) < at(r))) out.push(patched[i++]);
    else out.push(serverOnly[j++]);
  }
  return out;
}

function withoutDirectives(p: unknown): unknown {
  if (Array.isArray(p)) return p.map(withoutDirectives);
  if (!isObject(p)) return p;
  return Object.fromEntries(
    Object.entries(p)
      .filter(([k]) => !k.startsWith("$"))
      .map(([k, v]) => [k, withoutDirectives(v)]),
  );
}

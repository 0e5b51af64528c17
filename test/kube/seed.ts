// Seed manifests: multi-document YAML (and `kind: List`) read into objects, ordered the way
// `kubectl apply` of a mixed bundle has to be — CRDs first (their resources do not exist before),
// then namespaces, then everything else in file order.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { isObject, type Obj } from "./json.js";

export function readManifests(file: string | URL): Obj[] {
  const out: Obj[] = [];
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length > 0) throw new Error(`${String(file)}: ${doc.errors[0]!.message}`);
    const v: unknown = doc.toJS();
    if (v === null || v === undefined) continue;
    if (!isObject(v)) throw new Error(`${String(file)}: a document is not an object`);
    if (typeof v.kind === "string" && v.kind.endsWith("List") && Array.isArray(v.items)) out.push(...(v.items as Obj[]));
    else out.push(v);
  }
  return out;
}

const rank = (o: Obj) => (o.kind === "CustomResourceDefinition" ? 0 : o.kind === "Namespace" && o.apiVersion === "v1" ? 1 : 2);

export function seedOrder(objs: Obj[]): Obj[] {
  return objs
    .map((o, i) => ({ o, i }))
    .sort((a, b) => rank(a.o) - rank(b.o) || a.i - b.i)
    .map(({ o }) => o);
}

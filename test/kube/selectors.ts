// labelSelector and fieldSelector as list and watch take them. Field selectors support only the
// fields the real server indexes for a type (metadata.name/namespace everywhere, a few per kind);
// anything else is a 400, as in a real cluster, so a client cannot rely on a filter it won't get.
import { isObject, type Obj } from "./json.js";
import { badRequest } from "./status.js";

export type Predicate = (obj: Obj) => boolean;

const extraFields: Record<string, string[]> = {
  "/pods": ["spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "status.phase", "status.podIP", "status.nominatedNodeName"],
  "/secrets": ["type"],
  "/events": [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
  ],
  "/namespaces": ["status.phase"],
  "/nodes": ["spec.unschedulable"],
  "storage.k8s.io/volumeattachments": [],
};

function getPath(obj: Obj, path: string): string {
  let cur: unknown = obj;
  for (const seg of path.split(".")) cur = isObject(cur) ? cur[seg] : undefined;
  return cur === undefined || cur === null ? "" : String(cur);
}

interface Req {
  key: string;
  op: "=" | "!=" | "in" | "notin" | "exists" | "!exists";
  values: string[];
}

/** Splits at commas that are not inside parentheses ("a in (x,y),b=c"). */
function splitTop(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of s) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      out.push(cur);
      cur = "";
    } else cur += ch;
  }
  out.push(cur);
  return out.map((p) => p.trim()).filter((p) => p !== "");
}

function parseLabelReq(part: string): Req {
  let m = /^([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)$/.exec(part);
  if (m) return { key: m[1]!, op: m[2] === "!=" ? "!=" : "=", values: [m[3]!] };
  m = /^([^\s!=(),]+)\s+(in|notin)\s*\(([^()]*)\)$/.exec(part);
  if (m) return { key: m[1]!, op: m[2] as "in" | "notin", values: m[3]!.split(",").map((v) => v.trim()) };
  m = /^(!?)\s*([^\s!=(),]+)$/.exec(part);
  if (m) return { key: m[2]!, op: m[1] ? "!exists" : "exists", values: [] };
  throw badRequest(`unable to parse requirement: found '${part}', expected: '=', '!=', '==', 'in', notin'`);
}

function matches(req: Req, has: boolean, value: string): boolean {
  switch (req.op) {
    case "=":
      return has && value === req.values[0];
    case "!=":
      return !has || value !== req.values[0];
    case "in":
      return has && req.values.includes(value);
    case "notin":
      return !has || !req.values.includes(value);
    case "exists":
      return has;
    case "!exists":
      return !has;
  }
}

export function labelSelector(sel: string | null | undefined): Predicate {
  if (!sel) return () => true;
  const reqs = splitTop(sel).map(parseLabelReq);
  return (obj) => {
    const labels = ((obj.metadata as Obj | undefined)?.labels ?? {}) as Record<string, string>;
    return reqs.every((r) => matches(r, Object.hasOwn(labels, r.key), labels[r.key] ?? ""));
  };
}

function parseFieldReqs(sel: string | null | undefined, typeKey: string): Req[] {
  if (!sel) return [];
  const allowed = ["metadata.name", "metadata.namespace", ...(extraFields[typeKey] ?? [])];
  return splitTop(sel).map((part) => {
    const m = /^([^!=]+?)\s*(==|=|!=)\s*(.*)$/.exec(part);
    if (!m) throw badRequest(`invalid selector: '${sel}'; can't understand '${part}'`);
    if (!allowed.includes(m[1]!)) throw badRequest(`field label not supported: ${m[1]}`);
    return { key: m[1], op: m[2] === "!=" ? "!=" : "=", values: [m[3]] } as Req;
  });
}

/** `typeKey` is storageKey(type): it decides which extra fields are selectable. */
export function fieldSelector(sel: string | null | undefined, typeKey: string): Predicate {
  const reqs = parseFieldReqs(sel, typeKey);
  return (obj) => reqs.every((r) => matches(r, true, getPath(obj, r.key)));
}

/** The name a list/watch is narrowed to by `metadata.name=X`: RBAC checks resourceNames against it. */
export function selectedName(sel: string | null | undefined): string | undefined {
  if (!sel) return undefined;
  for (const part of splitTop(sel)) {
    const m = /^metadata\.name\s*(==|=)\s*(.*)$/.exec(part);
    if (m) return m[2];
  }
  return undefined;
}

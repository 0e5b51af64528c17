// Server-side printing (meta.k8s.io/v1 Table) for `kubectl get`: Name plus a CRD's
// additionalPrinterColumns (simple JSONPath), else Name and Age. Built-in kinds get only
// Name/Age, not their richer real columns (see README).
import { isObject, type Obj } from "./json.js";
import type { PrinterColumn, ResourceType } from "./resources.js";

export const wantsTable = (accept: string | undefined) => /as=Table/.test(accept ?? "");

const nameColumn = { name: "Name", type: "string", format: "name", description: "Name must be unique within a namespace.", priority: 0 };
const ageColumn: PrinterColumn = { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp", description: "Time since creation" };

/** Go's duration.HumanDuration, as kubectl shows ages. */
function humanAge(ts: unknown): string {
  const t = typeof ts === "string" ? Date.parse(ts) : NaN;
  if (Number.isNaN(t)) return "<unknown>";
  const s = Math.max(0, Math.floor((Date.now() - t) / 1000));
  const m = Math.floor(s / 60);
  const h = Math.floor(m / 60);
  if (s < 120) return `${s}s`;
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

/** A small JSONPath: ".a.b", ".a[0].b" (what printer columns use in practice). */
function pick(obj: Obj, path: string): unknown {
  let cur: unknown = obj;
  for (const seg of path
    .replace(/^\{?\.?/, "")
    .replace(/\}$/, "")
    .split(/\.|(?=\[)/)
    .filter(Boolean)) {
    const idx = /^\[(\d+)\]$/.exec(seg);
    if (idx) cur = Array.isArray(cur) ? cur[Number(idx[1])] : undefined;
    else cur = isObject(cur) ? cur[seg] : undefined;
  }
  return cur;
}

function cell(c: PrinterColumn, obj: Obj): unknown {
  const v = pick(obj, c.jsonPath);
  if (c.type === "date") return humanAge(v);
  if (v === undefined || v === null) return null;
  return typeof v === "object" ? JSON.stringify(v) : v;
}

export function asTable(t: ResourceType, items: Obj[], listMeta: Obj): Obj {
  const custom = t.custom?.columns.length ? t.custom.columns : [ageColumn];
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: { resourceVersion: listMeta.resourceVersion, ...(listMeta.continue ? { continue: listMeta.continue } : {}) },
    columnDefinitions: [
      nameColumn,
      ...custom.map((c) => ({ name: c.name, type: c.type, format: c.format ?? "", description: c.description ?? "", priority: c.priority ?? 0 })),
    ],
    rows: items.map((o) => ({
      cells: [(o.metadata as Obj).name, ...custom.map((c) => cell(c, o))],
      object: { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: o.metadata },
    })),
  };
}

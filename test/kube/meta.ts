// ObjectMeta validation shared by every resource: names, labels, annotations, finalizers and
// ownerReferences, with the messages of k8s.io/apimachinery's validation package. A name the real
// API server refuses must be refused here too, or a test would bless a name that fails in a cluster.
import { type FieldError, invalid, required } from "./status.js";

const dns1123LabelRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123SubdomainRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const qualifiedNameRe = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const labelValueRe = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

const subdomainMsg =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const labelMsg =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/** Returns the reasons `name` is not a DNS-1123 subdomain (empty when it is one). */
export function dns1123Subdomain(name: string): string[] {
  const errs: string[] = [];
  if (name.length > 253) errs.push("must be no more than 253 characters");
  if (!dns1123SubdomainRe.test(name)) errs.push(subdomainMsg);
  return errs;
}

export function dns1123Label(name: string): string[] {
  const errs: string[] = [];
  if (name.length > 63) errs.push("must be no more than 63 characters");
  if (!dns1123LabelRe.test(name)) errs.push(labelMsg);
  return errs;
}

export type NameRule = "subdomain" | "label" | "any";
const nameCheckers: Record<NameRule, (n: string) => string[]> = {
  subdomain: dns1123Subdomain,
  label: dns1123Label,
  // Event names and a few others are only checked for path safety.
  any: (n) => (n === "." || n === ".." || /[/%]/.test(n) ? [`may not be '${n}' or contain '/' or '%'`] : []),
};

/** A qualified name (label key, finalizer): optional DNS subdomain prefix, "/", name of ≤63 chars. */
export function qualifiedName(value: string): string[] {
  const parts = value.split("/");
  let name = value;
  const errs: string[] = [];
  if (parts.length === 2) {
    const [prefix, rest] = parts as [string, string];
    if (prefix.length === 0) errs.push("prefix part must be non-empty");
    else errs.push(...dns1123Subdomain(prefix).map((m) => `prefix part ${m}`));
    name = rest;
  } else if (parts.length > 2) {
    return [
      "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ];
  }
  if (name.length === 0) errs.push("name part must be non-empty");
  else if (name.length > 63) errs.push("name part must be no more than 63 characters");
  if (name.length > 0 && !qualifiedNameRe.test(name))
    errs.push(
      "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    );
  return errs;
}

function labelValue(v: string): string[] {
  const errs: string[] = [];
  if (v.length > 63) errs.push("must be no more than 63 characters");
  if (!labelValueRe.test(v))
    errs.push(
      "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    );
  return errs;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function stringMap(meta: Record<string, unknown>, key: string, out: FieldError[]): Record<string, unknown> | undefined {
  const m = meta[key];
  if (m === undefined || m === null) return undefined;
  if (!isObject(m)) {
    out.push({ type: "FieldValueTypeInvalid", field: `metadata.${key}`, badValue: typeof m, detail: "must be a map of string to string" });
    return undefined;
  }
  for (const [k, v] of Object.entries(m))
    if (typeof v !== "string") out.push({ type: "FieldValueTypeInvalid", field: `metadata.${key}.${k}`, badValue: v, detail: "must be a string" });
  return m;
}

/**
 * ObjectMeta of an object about to be stored (after generateName was resolved). `namespaced`
 * says whether metadata.namespace must be set.
 */
export function validateObjectMeta(meta: Record<string, unknown>, rule: NameRule, namespaced: boolean): FieldError[] {
  const out: FieldError[] = [];
  const name = meta.name;
  if (typeof name !== "string" || name === "") out.push(required("metadata.name", "name or generateName is required"));
  else for (const m of nameCheckers[rule](name)) out.push(invalid("metadata.name", name, m));
  if (namespaced && !meta.namespace) out.push(required("metadata.namespace"));
  if (typeof meta.namespace === "string" && meta.namespace !== "")
    for (const m of dns1123Label(meta.namespace)) out.push(invalid("metadata.namespace", meta.namespace, m));

  const labels = stringMap(meta, "labels", out);
  for (const [k, v] of Object.entries(labels ?? {})) {
    for (const m of qualifiedName(k)) out.push(invalid("metadata.labels", k, m));
    if (typeof v === "string") for (const m of labelValue(v)) out.push(invalid(`metadata.labels`, v, m));
  }
  const annotations = stringMap(meta, "annotations", out);
  let size = 0;
  for (const [k, v] of Object.entries(annotations ?? {})) {
    for (const m of qualifiedName(k.toLowerCase())) out.push(invalid("metadata.annotations", k, m));
    size += k.length + (typeof v === "string" ? v.length : 0);
  }
  if (size > 256 * 1024) out.push({ type: "FieldValueTooLong", field: "metadata.annotations", detail: "may not be more than 262144 bytes" });

  const fin = meta.finalizers;
  if (fin !== undefined && fin !== null) {
    if (!Array.isArray(fin))
      out.push({ type: "FieldValueTypeInvalid", field: "metadata.finalizers", badValue: typeof fin, detail: "must be a list of strings" });
    else
      fin.forEach((f, i) => {
        if (typeof f !== "string") out.push({ type: "FieldValueTypeInvalid", field: `metadata.finalizers[${i}]`, badValue: f, detail: "must be a string" });
        else for (const m of qualifiedName(f)) out.push(invalid(`metadata.finalizers[${i}]`, f, m));
      });
  }

  const owners = meta.ownerReferences;
  if (owners !== undefined && owners !== null) {
    if (!Array.isArray(owners))
      out.push({ type: "FieldValueTypeInvalid", field: "metadata.ownerReferences", badValue: typeof owners, detail: "must be a list" });
    else {
      let controllers = 0;
      owners.forEach((o, i) => {
        const p = `metadata.ownerReferences[${i}]`;
        if (!isObject(o)) return out.push(invalid(p, o, "must be an object"));
        for (const k of ["apiVersion", "kind", "name", "uid"])
          if (typeof o[k] !== "string" || o[k] === "") out.push(required(`${p}.${k}`, `${k} must not be empty`));
        if (o.controller === true) controllers++;
      });
      if (controllers > 1) out.push(invalid("metadata.ownerReferences", owners, "Only one reference can have Controller set to true"));
    }
  }
  return out;
}

/** generateName + 5 random characters from the alphabet k8s.io/apiserver uses. */
export function generateName(prefix: string): string {
  const alphabet = "bcdfghjklmnpqrstvwxz2456789";
  let s = "";
  for (let i = 0; i < 5; i++) s += alphabet[Math.floor(Math.random() * alphabet.length)];
  const max = 253 - 5;
  return (prefix.length > max ? prefix.slice(0, max) : prefix) + s;
}

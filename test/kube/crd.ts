// CustomResourceDefinition semantics: what a CRD must look like to be accepted (a subset of
// apiextensions' validation, plus refusing features this server would silently not enforce), and
// how an accepted CRD turns into served resource types. The CRD "controllers" (establishing,
// instance cleanup on delete) live in controllers.ts.
import { isObject, nowRfc3339, type Obj } from "./json.js";
import { dns1123Label, dns1123Subdomain } from "./meta.js";
import { type PrinterColumn, type ResourceType, crudVerbs } from "./resources.js";
import { checkSchema, type Schema } from "./schema.js";
import { type FieldError, invalid, required } from "./status.js";

interface CrdNames {
  plural: string;
  singular?: string;
  kind: string;
  listKind?: string;
  shortNames?: string[];
  categories?: string[];
}
interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  schema?: { openAPIV3Schema?: Schema };
  subresources?: { status?: object; scale?: object };
  additionalPrinterColumns?: PrinterColumn[];
}
interface CrdSpec {
  group: string;
  names: CrdNames;
  scope: string;
  versions: CrdVersion[];
  conversion?: { strategy?: string };
}

const spec = (crd: Obj) => crd.spec as CrdSpec;

export function validateCrd(crd: Obj): FieldError[] {
  const errs: FieldError[] = [];
  const s = crd.spec as Partial<CrdSpec> | undefined;
  const name = (crd.metadata as Obj | undefined)?.name;
  if (!s) return [required("spec")];
  if (!s.group) errs.push(required("spec.group"));
  else if (!s.group.includes(".")) errs.push(invalid("spec.group", s.group, "should be a domain with at least one dot"));
  else for (const m of dns1123Subdomain(s.group)) errs.push(invalid("spec.group", s.group, m));
  const n = s.names;
  if (!n?.plural) errs.push(required("spec.names.plural"));
  else for (const m of dns1123Label(n.plural)) errs.push(invalid("spec.names.plural", n.plural, m));
  if (!n?.kind) errs.push(required("spec.names.kind"));
  if (n?.singular) for (const m of dns1123Label(n.singular)) errs.push(invalid("spec.names.singular", n.singular, m));
  if (s.group && n?.plural && name !== `${n.plural}.${s.group}`) errs.push(invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'));
  if (s.scope !== "Namespaced" && s.scope !== "Cluster")
    errs.push({ type: "FieldValueNotSupported", field: "spec.scope", badValue: s.scope, detail: 'supported values: "Cluster", "Namespaced"' });
  if (s.conversion?.strategy && s.conversion.strategy !== "None")
    errs.push({ type: "FieldValueForbidden", field: "spec.conversion.strategy", detail: "conversion webhooks are not supported by this in-memory API server" });
  const versions = s.versions ?? [];
  if (versions.length === 0) errs.push(required("spec.versions", "must have exactly one version marked as storage version"));
  else if (versions.filter((v) => v.storage).length !== 1)
    errs.push(
      invalid(
        "spec.versions",
        versions.map((v) => v.name),
        "must have exactly one version marked as storage version",
      ),
    );
  const seen = new Set<string>();
  versions.forEach((v, i) => {
    const p = `spec.versions[${i}]`;
    if (seen.has(v.name)) errs.push({ type: "FieldValueDuplicate", field: `${p}.name`, badValue: v.name });
    seen.add(v.name);
    const root = v.schema?.openAPIV3Schema;
    if (!root) errs.push(required(`${p}.schema.openAPIV3Schema`, "schemas are required"));
    else {
      if (root.type !== "object") errs.push(invalid(`${p}.schema.openAPIV3Schema.type`, root.type, 'must be "object" at the root'));
      errs.push(...checkSchema(root, `${p}.schema.openAPIV3Schema`));
    }
    if (v.subresources?.scale)
      errs.push({
        type: "FieldValueForbidden",
        field: `${p}.subresources.scale`,
        detail: "the scale subresource is not supported by this in-memory API server",
      });
  });
  return errs;
}

/** The resource types an accepted CRD serves, one per served version (all share one storage). */
export function crdTypes(crd: Obj): ResourceType[] {
  const s = spec(crd);
  const storage = s.versions.find((v) => v.storage)!.name;
  const kind = s.names.kind;
  return s.versions
    .filter((v) => v.served)
    .map((v) => ({
      group: s.group,
      version: v.name,
      plural: s.names.plural,
      singular: s.names.singular ?? kind.toLowerCase(),
      kind,
      listKind: s.names.listKind ?? `${kind}List`,
      namespaced: s.scope === "Namespaced",
      shortNames: s.names.shortNames,
      categories: s.names.categories,
      verbs: crudVerbs,
      statusSubresource: isObject(v.subresources?.status),
      nameRule: "subdomain" as const,
      tracksGeneration: true,
      // With the status subresource, create drops status (customresource strategy PrepareForCreate).
      statusOnCreate: isObject(v.subresources?.status) ? () => undefined : undefined,
      allowUnconditionalUpdate: false,
      custom: {
        crdName: String((crd.metadata as Obj).name),
        schema: v.schema!.openAPIV3Schema!,
        storageVersion: storage,
        columns: v.additionalPrinterColumns ?? [],
      },
    }));
}

/** The finalizer the real apiextensions server puts on every CRD so instances are cleaned up first. */
export const CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io";

/** Status as the establishing controller sets it: names accepted, established, stored versions. */
export function establishedStatus(crd: Obj): Obj {
  const s = spec(crd);
  const now = nowRfc3339();
  const names = { ...s.names, singular: s.names.singular ?? s.names.kind.toLowerCase(), listKind: s.names.listKind ?? `${s.names.kind}List` };
  return {
    conditions: [
      { type: "NamesAccepted", status: "True", lastTransitionTime: now, reason: "NoConflicts", message: "no conflicts found" },
      { type: "Established", status: "True", lastTransitionTime: now, reason: "InitialNamesAccepted", message: "the initial names have been accepted" },
    ],
    acceptedNames: names,
    storedVersions: [s.versions.find((v) => v.storage)!.name],
  };
}

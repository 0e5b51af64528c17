// The resource types this server serves: the built-in table (only what the project uses) and the
// shape that CRD registration fills in for custom resources. Per-type behaviour that the real API
// server keeps in each resource's "strategy" (status reset on create, who tracks generation, ...)
// is data here, so the generic store applies it the same way for every type.
import type { NameRule } from "./meta.js";
import type { Schema } from "./schema.js";
import type { FieldError } from "./status.js";
import { builtinValidator } from "./builtin-validate.js";

export type Verb = "get" | "list" | "watch" | "create" | "update" | "patch" | "delete";
export const crudVerbs: Verb[] = ["create", "delete", "get", "list", "patch", "update", "watch"];

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  description?: string;
  priority?: number;
  format?: string;
}

export interface ResourceType {
  group: string;
  version: string;
  plural: string;
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames?: string[];
  categories?: string[];
  verbs: Verb[];
  /** PUT/PATCH on the main resource keep the old status; /status changes only status. */
  statusSubresource: boolean;
  nameRule: NameRule;
  /** metadata.generation is 1 on create and bumps when anything but metadata (and status) changes. */
  tracksGeneration: boolean;
  /** What status an object created through the API gets (the zero value of its Go status type, as
   *  serialised); undefined = keep what the client sent. */
  statusOnCreate?: () => unknown;
  /** The real registry answers a finished delete with the object instead of a Status for these. */
  returnDeletedObject?: boolean;
  /** Custom resources refuse PUT without metadata.resourceVersion (422). */
  allowUnconditionalUpdate: boolean;
  /** Structural validation of the whole object (built-ins: kubernetes-models' schemas). */
  validate?: (obj: Record<string, unknown>) => FieldError[];
  /** Server-side normalisation before validation (Secret.stringData → data, defaults). */
  normalize?: (obj: Record<string, unknown>) => void;
  /** Custom resources: the CRD's schema for this version, and printer columns. */
  custom?: { crdName: string; schema: Schema; storageVersion: string; columns: PrinterColumn[] };
  /** Create-only virtual resources (reviews) answered by a handler instead of being stored. */
  virtual?: boolean;
}

/** Storage identity: objects of every version of one resource live in one map. */
export const storageKey = (t: { group: string; plural: string }) => `${t.group}/${t.plural}`;
export const apiVersionOf = (t: { group: string; version: string }) => (t.group ? `${t.group}/${t.version}` : t.version);
export const groupResource = (t: ResourceType) => ({ group: t.group, resource: t.plural });
export const groupKind = (t: ResourceType) => ({ group: t.group, kind: t.kind });

interface Def {
  gv: string;
  plural: string;
  kind: string;
  namespaced: boolean;
  shortNames?: string[];
  categories?: string[];
  status?: boolean;
  generation?: boolean;
  statusOnCreate?: () => unknown;
  returnDeletedObject?: boolean;
  nameRule?: NameRule;
  verbs?: Verb[];
  virtual?: boolean;
  normalize?: (obj: Record<string, unknown>) => void;
}

function secretNormalize(obj: Record<string, unknown>): void {
  // stringData is write-only: the API server merges it into data (base64) and drops it.
  const sd = obj.stringData;
  if (sd && typeof sd === "object") {
    const data = { ...((obj.data as Record<string, string>) ?? {}) };
    for (const [k, v] of Object.entries(sd as Record<string, unknown>)) data[k] = Buffer.from(String(v)).toString("base64");
    obj.data = data;
  }
  delete obj.stringData;
  if (!obj.type) obj.type = "Opaque";
}

// What the API server defaults in a CSIDriver's spec (k8s.io/kubernetes pkg/apis/storage/v1
// SetDefaults_CSIDriver): a kubelet reads attachRequired as written, so an unset one must read true.
function csiDriverNormalize(obj: Record<string, unknown>): void {
  const spec = ((obj.spec as Record<string, unknown> | undefined) ??= {});
  const defaults: Record<string, unknown> = {
    attachRequired: true,
    podInfoOnMount: false,
    storageCapacity: false,
    requiresRepublish: false,
    seLinuxMount: false,
    fsGroupPolicy: "ReadWriteOnceWithFSType",
    volumeLifecycleModes: ["Persistent"],
  };
  for (const [k, v] of Object.entries(defaults)) if (spec[k] === undefined || spec[k] === null) spec[k] = v;
}

const defs: Def[] = [
  {
    gv: "v1",
    plural: "namespaces",
    kind: "Namespace",
    namespaced: false,
    shortNames: ["ns"],
    status: true,
    nameRule: "label",
    statusOnCreate: () => ({ phase: "Active" }),
  },
  { gv: "v1", plural: "nodes", kind: "Node", namespaced: false, shortNames: ["no"], status: true },
  {
    gv: "v1",
    plural: "pods",
    kind: "Pod",
    namespaced: true,
    shortNames: ["po"],
    categories: ["all"],
    status: true,
    statusOnCreate: () => ({ phase: "Pending" }),
    returnDeletedObject: true,
  },
  {
    gv: "v1",
    plural: "persistentvolumes",
    kind: "PersistentVolume",
    namespaced: false,
    shortNames: ["pv"],
    status: true,
    statusOnCreate: () => ({ phase: "Pending" }),
    returnDeletedObject: true,
  },
  {
    gv: "v1",
    plural: "persistentvolumeclaims",
    kind: "PersistentVolumeClaim",
    namespaced: true,
    shortNames: ["pvc"],
    status: true,
    statusOnCreate: () => ({ phase: "Pending" }),
    returnDeletedObject: true,
  },
  { gv: "v1", plural: "serviceaccounts", kind: "ServiceAccount", namespaced: true, shortNames: ["sa"] },
  { gv: "v1", plural: "secrets", kind: "Secret", namespaced: true, normalize: secretNormalize },
  { gv: "v1", plural: "events", kind: "Event", namespaced: true, shortNames: ["ev"], nameRule: "any" },
  {
    gv: "apps/v1",
    plural: "daemonsets",
    kind: "DaemonSet",
    namespaced: true,
    shortNames: ["ds"],
    categories: ["all"],
    status: true,
    generation: true,
    statusOnCreate: () => ({ currentNumberScheduled: 0, numberMisscheduled: 0, desiredNumberScheduled: 0, numberReady: 0 }),
  },
  {
    gv: "apps/v1",
    plural: "deployments",
    kind: "Deployment",
    namespaced: true,
    shortNames: ["deploy"],
    categories: ["all"],
    status: true,
    generation: true,
    statusOnCreate: () => ({}),
  },
  {
    gv: "apps/v1",
    plural: "replicasets",
    kind: "ReplicaSet",
    namespaced: true,
    shortNames: ["rs"],
    categories: ["all"],
    status: true,
    generation: true,
    statusOnCreate: () => ({ replicas: 0 }),
  },
  {
    gv: "apps/v1",
    plural: "statefulsets",
    kind: "StatefulSet",
    namespaced: true,
    shortNames: ["sts"],
    categories: ["all"],
    status: true,
    generation: true,
    statusOnCreate: () => ({ replicas: 0, availableReplicas: 0 }),
  },
  { gv: "storage.k8s.io/v1", plural: "csidrivers", kind: "CSIDriver", namespaced: false, normalize: csiDriverNormalize },
  { gv: "storage.k8s.io/v1", plural: "volumeattachments", kind: "VolumeAttachment", namespaced: false, status: true, statusOnCreate: () => undefined },
  { gv: "coordination.k8s.io/v1", plural: "leases", kind: "Lease", namespaced: true },
  { gv: "policy/v1", plural: "poddisruptionbudgets", kind: "PodDisruptionBudget", namespaced: true, shortNames: ["pdb"], status: true, generation: true },
  {
    gv: "apiextensions.k8s.io/v1",
    plural: "customresourcedefinitions",
    kind: "CustomResourceDefinition",
    namespaced: false,
    shortNames: ["crd", "crds"],
    categories: ["api-extensions"],
    status: true,
    generation: true,
  },
  { gv: "authentication.k8s.io/v1", plural: "tokenreviews", kind: "TokenReview", namespaced: false, verbs: ["create"], virtual: true, nameRule: "any" },
  {
    gv: "authorization.k8s.io/v1",
    plural: "subjectaccessreviews",
    kind: "SubjectAccessReview",
    namespaced: false,
    verbs: ["create"],
    virtual: true,
    nameRule: "any",
  },
  {
    gv: "authorization.k8s.io/v1",
    plural: "selfsubjectaccessreviews",
    kind: "SelfSubjectAccessReview",
    namespaced: false,
    verbs: ["create"],
    virtual: true,
    nameRule: "any",
  },
];

export function builtinTypes(): ResourceType[] {
  return defs.map((d) => {
    const [group, version] = (d.gv.includes("/") ? d.gv.split("/") : ["", d.gv]) as [string, string];
    return {
      group,
      version,
      plural: d.plural,
      singular: d.kind.toLowerCase(),
      kind: d.kind,
      listKind: `${d.kind}List`,
      namespaced: d.namespaced,
      shortNames: d.shortNames,
      categories: d.categories,
      verbs: d.verbs ?? crudVerbs,
      statusSubresource: d.status ?? false,
      nameRule: d.nameRule ?? "subdomain",
      tracksGeneration: d.generation ?? false,
      statusOnCreate: d.statusOnCreate,
      returnDeletedObject: d.returnDeletedObject,
      allowUnconditionalUpdate: true,
      validate: builtinValidator(d.gv, d.kind),
      normalize: d.normalize,
      virtual: d.virtual,
    };
  });
}

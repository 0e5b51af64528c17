// Structural validation of built-in kinds with kubernetes-models' precompiled OpenAPI schemas, so a
// Pod without containers or a PersistentVolume with a numeric driver is refused with 422 as a real
// API server would (it validates far more semantics; see README "What it does not do").
import { Event, Namespace, Node, PersistentVolume, Pod, Secret } from "kubernetes-models/v1";
import { DaemonSet, Deployment, ReplicaSet, StatefulSet } from "kubernetes-models/apps/v1";
import { CSIDriver, VolumeAttachment } from "kubernetes-models/storage.k8s.io/v1";
import { Lease } from "kubernetes-models/coordination.k8s.io/v1";
import { CustomResourceDefinition } from "kubernetes-models/apiextensions.k8s.io/v1";
import { TokenReview } from "kubernetes-models/authentication.k8s.io/v1";
import { SelfSubjectAccessReview, SubjectAccessReview } from "kubernetes-models/authorization.k8s.io/v1";
import type { FieldError } from "./status.js";

interface AjvError {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
}
type ModelClass = new (data: Record<string, unknown>) => { validate(): void };

const models: Record<string, ModelClass> = {
  "v1/Namespace": Namespace,
  "v1/Node": Node,
  "v1/Pod": Pod,
  "v1/PersistentVolume": PersistentVolume,
  "v1/Secret": Secret,
  "v1/Event": Event,
  "apps/v1/DaemonSet": DaemonSet,
  "apps/v1/Deployment": Deployment,
  "apps/v1/ReplicaSet": ReplicaSet,
  "apps/v1/StatefulSet": StatefulSet,
  "storage.k8s.io/v1/CSIDriver": CSIDriver,
  "storage.k8s.io/v1/VolumeAttachment": VolumeAttachment,
  "coordination.k8s.io/v1/Lease": Lease,
  "apiextensions.k8s.io/v1/CustomResourceDefinition": CustomResourceDefinition,
  "authentication.k8s.io/v1/TokenReview": TokenReview,
  "authorization.k8s.io/v1/SubjectAccessReview": SubjectAccessReview,
  "authorization.k8s.io/v1/SelfSubjectAccessReview": SelfSubjectAccessReview,
} as unknown as Record<string, ModelClass>;

const jsType = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v);

/** "/spec/containers/0/name" → "spec.containers[0].name", using the data to tell list indexes from keys. */
function fieldPath(data: unknown, pointer: string): { field: string; value: unknown } {
  let field = "";
  let cur: unknown = data;
  for (const raw of pointer.split("/").slice(1)) {
    const seg = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(cur)) {
      field += `[${seg}]`;
      cur = cur[Number(seg)];
    } else {
      field += field ? `.${seg}` : seg;
      cur = (cur as Record<string, unknown> | undefined)?.[seg];
    }
  }
  return { field, value: cur };
}

function toFieldError(data: unknown, e: AjvError): FieldError {
  const { field, value } = fieldPath(data, e.instancePath);
  const at = (f: string) => (field ? `${field}.${f}` : f);
  switch (e.keyword) {
    case "required":
      return { type: "FieldValueRequired", field: at(String(e.params.missingProperty)) };
    case "type":
      return {
        type: "FieldValueTypeInvalid",
        field,
        badValue: jsType(value),
        detail: `${field} in body must be of type ${String(e.params.type)}: "${jsType(value)}"`,
      };
    case "enum":
      return {
        type: "FieldValueNotSupported",
        field,
        badValue: value,
        detail: `supported values: ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`,
      };
    default:
      return { type: "FieldValueInvalid", field, badValue: value, detail: e.message ?? `failed ${e.keyword} check` };
  }
}

/** A validator for one built-in kind, or undefined when kubernetes-models has none for it. */
export function builtinValidator(gv: string, kind: string): ((obj: Record<string, unknown>) => FieldError[]) | undefined {
  const Model = models[`${gv}/${kind}`];
  if (!Model) return undefined;
  return (obj) => {
    try {
      new Model(obj).validate();
      return [];
    } catch (err) {
      const errors = (err as { errors?: AjvError[] }).errors;
      if (!Array.isArray(errors)) throw err;
      // Server-set metadata (creationTimestamp null from kubectl, etc.) is not the client's fault.
      return errors.filter((e) => !e.instancePath.startsWith("/metadata/creationTimestamp")).map((e) => toFieldError(obj, e));
    }
  };
}

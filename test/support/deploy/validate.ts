// Schema checks for the manifests in deploy/: the Kubernetes OpenAPI schemas (kubernetes-models)
// plus the unknown-field check that `kubectl apply` makes (its field validation is strict), and
// the CRD schema comparison against upstream.
import { isDeepStrictEqual } from "node:util";
import { CustomResourceDefinition } from "kubernetes-models/apiextensions.k8s.io/v1";
import { DaemonSet, Deployment } from "kubernetes-models/apps/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { ConfigMap, Namespace, Service, ServiceAccount } from "kubernetes-models/v1";
import type { K8sObject } from "./load.js";

type Validating = { prototype: { validate(): void } };

const models: Record<string, Validating> = {
  "v1/Namespace": Namespace,
  "v1/ServiceAccount": ServiceAccount,
  "v1/Service": Service,
  "v1/ConfigMap": ConfigMap,
  "apps/v1/Deployment": Deployment,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "rbac.authorization.k8s.io/v1/Role": Role,
  "rbac.authorization.k8s.io/v1/RoleBinding": RoleBinding,
  "rbac.authorization.k8s.io/v1/ClusterRole": ClusterRole,
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": ClusterRoleBinding,
  "apps/v1/DaemonSet": DaemonSet,
  "apiextensions.k8s.io/v1/CustomResourceDefinition": CustomResourceDefinition,
};

/**
 * Validates an object against its kind's schema and returns the paths of fields the schema does
 * not know (a typo such as `mountPropogation` passes the schema, which allows extra fields, but
 * `kubectl apply` rejects it). Unknown fields are found by watching which keys the generated
 * validator reads: it reads every field its schema defines. `opaque` lists paths whose subtrees
 * the validator does not describe (checked elsewhere). Throws when the schema check fails.
 */
export function validateStrict(obj: K8sObject, opaque: RegExp[] = []): string[] {
  const model = models[`${obj.apiVersion}/${obj.kind}`];
  if (!model) throw new Error(`no schema for ${obj.apiVersion} ${obj.kind}; add its kubernetes-models class`);
  const read = new Map<string, Set<string>>();
  const own = new Map<string, string[]>();
  const watch = (value: unknown, path: string): unknown => {
    if (value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) return value.map((v, i) => watch(v, `${path}/${i}`));
    const keys = new Set<string>();
    read.set(path, keys);
    own.set(path, Object.keys(value));
    const copy = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, watch(v, `${path}/${k}`)]));
    return new Proxy(copy, {
      get(target, key, receiver) {
        if (typeof key === "string") keys.add(key);
        return Reflect.get(target, key, receiver);
      },
    });
  };
  model.prototype.validate.call(watch(obj, ""));
  const unknown: string[] = [];
  for (const [path, keys] of own) {
    for (const key of keys) {
      const field = `${path}/${key}`;
      if (!read.get(path)!.has(key) && !opaque.some((o) => o.test(field))) unknown.push(field);
    }
  }
  // Report an unknown field once, not every field below it too.
  return unknown.filter((u) => !unknown.some((parent) => u.startsWith(`${parent}/`)));
}

/** The part of a CRD the validator leaves undescribed: the openAPIV3Schema tree. */
export const crdSchemaTree = /^\/spec\/versions\/\d+\/schema\/openAPIV3Schema\//;

type Schema = Record<string, unknown>;

// The JSONSchemaProps fields (apiextensions.k8s.io/v1), and those of a CEL validation rule.
const schemaKeywords = new Set([
  "$ref",
  "$schema",
  "additionalItems",
  "additionalProperties",
  "allOf",
  "anyOf",
  "default",
  "definitions",
  "dependencies",
  "description",
  "enum",
  "example",
  "exclusiveMaximum",
  "exclusiveMinimum",
  "externalDocs",
  "format",
  "id",
  "items",
  "maxItems",
  "maxLength",
  "maxProperties",
  "maximum",
  "minItems",
  "minLength",
  "minProperties",
  "minimum",
  "multipleOf",
  "not",
  "nullable",
  "oneOf",
  "pattern",
  "patternProperties",
  "properties",
  "required",
  "title",
  "type",
  "uniqueItems",
  "x-kubernetes-embedded-resource",
  "x-kubernetes-int-or-string",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-list-type",
  "x-kubernetes-map-type",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-validations",
]);
const celRuleFields = new Set(["rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf"]);

/** Fields of a CRD's openAPIV3Schema that are not JSONSchemaProps fields (what kubectl would reject). */
export function unknownSchemaKeywords(schema: Schema, path = ""): string[] {
  const found: string[] = [];
  for (const [key, value] of Object.entries(schema)) {
    const at = `${path}/${key}`;
    if (!schemaKeywords.has(key)) found.push(at);
    else if (key === "properties") {
      for (const [name, sub] of Object.entries(value as Record<string, Schema>)) found.push(...unknownSchemaKeywords(sub, `${at}/${name}`));
    } else if ((key === "items" || key === "additionalProperties") && typeof value === "object" && value !== null) {
      found.push(...unknownSchemaKeywords(value as Schema, at));
    } else if (key === "x-kubernetes-validations") {
      (value as Schema[]).forEach((rule, i) => {
        for (const field of Object.keys(rule)) if (!celRuleFields.has(field)) found.push(`${at}/${i}/${field}`);
      });
    }
  }
  return found;
}

/**
 * Where `ours` accepts something else than `upstream`: a walk over both openAPIV3Schemas that
 * ignores descriptions only. Every property must exist in both with the same type, required list
 * (in any order), CEL validations and every other keyword, so anything valid under one is valid
 * under the other (an extra property in ours would reject values that upstream prunes).
 */
export function schemaDifferences(upstream: Schema, ours: Schema, path = ""): string[] {
  const found: string[] = [];
  const keys = new Set([...Object.keys(upstream), ...Object.keys(ours)]);
  keys.delete("description");
  for (const key of [...keys].sort()) {
    const at = `${path}/${key}`;
    const [u, o] = [upstream[key], ours[key]];
    if (u === undefined || o === undefined) {
      found.push(`${at}: only in ${u === undefined ? "ours" : "upstream"}`);
    } else if (key === "properties") {
      const [uProps, oProps] = [u as Record<string, Schema>, o as Record<string, Schema>];
      for (const name of [...new Set([...Object.keys(uProps), ...Object.keys(oProps)])].sort()) {
        if (!uProps[name] || !oProps[name]) found.push(`${at}/${name}: only in ${uProps[name] ? "upstream" : "ours"}`);
        else found.push(...schemaDifferences(uProps[name], oProps[name], `${at}/${name}`));
      }
    } else if ((key === "items" || key === "additionalProperties") && typeof u === "object" && typeof o === "object") {
      found.push(...schemaDifferences(u as Schema, o as Schema, at));
    } else if (key === "required") {
      if (!isDeepStrictEqual([...(u as string[])].sort(), [...(o as string[])].sort())) found.push(`${at}: differs`);
    } else if (!isDeepStrictEqual(u, o)) {
      found.push(`${at}: differs`);
    }
  }
  return found;
}

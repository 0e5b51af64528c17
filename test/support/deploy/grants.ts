// What a set of manifests grants, per user: every RoleBinding and ClusterRoleBinding resolved to
// its role's rules, for the in-memory API server's allow table. ServiceAccount subjects become
// their users ("system:serviceaccount:<namespace>:<name>"), as the API server names them.
import type { KubeApi } from "../../kube/index.js";
import { findOne, type K8sObject, type Manifest } from "./load.js";
import type { Rule } from "./rbac.js";

interface Binding extends K8sObject {
  roleRef: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

export interface Grant {
  user: string;
  rules: Rule[];
  /** RoleBinding: only in this namespace; undefined: cluster-wide. */
  namespace?: string;
}

export function grantsOf(manifests: Manifest[]): Grant[] {
  return manifests.flatMap(({ doc }) => {
    if (doc.kind !== "RoleBinding" && doc.kind !== "ClusterRoleBinding") return [];
    const b = doc as Binding;
    const role = findOne(manifests, b.roleRef.kind, b.roleRef.name) as K8sObject & { rules?: Rule[] };
    const users = (b.subjects ?? []).map((s) => (s.kind === "ServiceAccount" ? `system:serviceaccount:${s.namespace}:${s.name}` : s.name));
    const namespace = b.kind === "RoleBinding" ? b.metadata.namespace : undefined;
    return users.map((user) => ({ user, rules: role.rules ?? [], namespace }));
  });
}

export function installGrants(kube: KubeApi, grants: Grant[]): void {
  for (const g of grants) for (const r of g.rules) kube.auth.allow(g.user, { ...r, namespace: g.namespace });
}

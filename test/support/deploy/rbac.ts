// The sidecar's permissions exactly as deploy/ grants them: the rules of every Role and
// ClusterRole that a RoleBinding or ClusterRoleBinding of the rendered install (kubectl kustomize
// deploy/) binds to the sidecar's ServiceAccount. Tests load these into the in-memory API
// server's allow table.
import { findOne, loadManifests, type K8sObject, type Manifest } from "./load.js";

export interface Rule {
  verbs: string[];
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
}

export interface RbacRules {
  /** Granted in the sidecar's namespace only (RoleBindings there). */
  namespaced: Rule[];
  /** Granted cluster-wide (ClusterRoleBindings). */
  cluster: Rule[];
}

/** The ServiceAccount the example DaemonSet runs the sidecar as (deploy/base's default subject). */
export const sidecarServiceAccount = "csi-addons-healer";

interface Binding extends K8sObject {
  roleRef: { apiGroup: string; kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

interface RoleObject extends K8sObject {
  rules?: (Rule & { nonResourceURLs?: string[] })[];
}

/** The rules bound to `serviceAccount` (default: the sidecar's). */
export function loadRbacRules(manifests: Manifest[] = loadManifests(), serviceAccount = sidecarServiceAccount): RbacRules {
  const account = findOne(manifests, "ServiceAccount", serviceAccount);
  const result: RbacRules = { namespaced: [], cluster: [] };
  for (const { doc } of manifests) {
    if (doc.kind !== "RoleBinding" && doc.kind !== "ClusterRoleBinding") continue;
    const binding = doc as Binding;
    const bindsSidecar = (binding.subjects ?? []).some(
      (s) => s.kind === "ServiceAccount" && s.name === serviceAccount && s.namespace === account.metadata.namespace,
    );
    if (!bindsSidecar) continue;
    const role = findOne(manifests, binding.roleRef.kind, binding.roleRef.name) as RoleObject;
    if (binding.kind === "RoleBinding" && binding.metadata.namespace !== account.metadata.namespace) {
      throw new Error(`RoleBinding ${binding.metadata.name} grants in another namespace than the sidecar's`);
    }
    const target = binding.kind === "RoleBinding" ? result.namespaced : result.cluster;
    for (const rule of role.rules ?? []) {
      if (rule.nonResourceURLs) throw new Error(`${role.kind} ${role.metadata.name}: nonResourceURLs are not expected`);
      target.push({
        verbs: [...rule.verbs],
        apiGroups: [...rule.apiGroups],
        resources: [...rule.resources],
        ...(rule.resourceNames ? { resourceNames: [...rule.resourceNames] } : {}),
      });
    }
  }
  return result;
}

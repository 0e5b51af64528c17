// The pods/eviction subresource (POST /api/v1/namespaces/{ns}/pods/{name}/eviction, policy/v1
// Eviction), as kube-apiserver's EvictionREST answers it (kubernetes
// pkg/registry/core/pod/storage/eviction.go): a pod that is not running (Pending, Succeeded,
// Failed) or already being deleted is deleted without asking any budget; otherwise the one
// PodDisruptionBudget of its namespace whose selector matches its labels must allow a disruption:
// more than one is 500; a budget whose status lags its spec (observedGeneration < generation) or
// allows none is 429 "Cannot evict pod as it would violate the pod's disruption budget." with a
// DisruptionBudget cause; a negative one 403. An allowed eviction takes one from
// status.disruptionsAllowed, records the pod in status.disruptedPods, then deletes the pod.
// There is no disruption controller here: a test sets a budget's status as that controller would.
import { checkTypeMeta } from "./admit.js";
import { isObject, type Obj } from "./json.js";
import { listObjects } from "./list.js";
import type { Ops } from "./ops.js";
import type { ResourceType } from "./resources.js";
import { labelSelector } from "./selectors.js";
import { badRequest, evictionRefused, forbidden, plainFailure } from "./status.js";

const evictionType = { group: "policy", version: "v1", kind: "Eviction" } as const;

/** A LabelSelector (matchLabels, matchExpressions) as a selector string; {} selects every pod (policy/v1). */
function selectorString(sel: Obj | undefined): string {
  const parts = Object.entries((sel?.matchLabels ?? {}) as Record<string, string>).map(([k, v]) => `${k}=${v}`);
  for (const e of (sel?.matchExpressions ?? []) as { key: string; operator: string; values?: string[] }[]) {
    if (e.operator === "In") parts.push(`${e.key} in (${(e.values ?? []).join(",")})`);
    else if (e.operator === "NotIn") parts.push(`${e.key} notin (${(e.values ?? []).join(",")})`);
    else if (e.operator === "Exists") parts.push(e.key);
    else if (e.operator === "DoesNotExist") parts.push(`!${e.key}`);
  }
  return parts.join(",");
}

export function evictPod(ops: Ops, podType: ResourceType, namespace: string, name: string, raw: unknown): Obj {
  const body = checkTypeMeta({ ...podType, ...evictionType }, raw ?? {});
  const meta = (isObject(body.metadata) ? body.metadata : {}) as Obj;
  if (meta.name !== undefined && meta.name !== name) throw badRequest(`name in URL does not match name in Eviction object`);
  const deleteOptions = (isObject(body.deleteOptions) ? body.deleteOptions : {}) as { preconditions?: { uid?: string; resourceVersion?: string } };
  const pod = ops.get(podType, namespace, name);
  const phase = String((pod.status as Obj | undefined)?.phase ?? "");
  const ignoresBudgets = ["Pending", "Succeeded", "Failed"].includes(phase) || (pod.metadata as Obj).deletionTimestamp !== undefined;
  if (!ignoresBudgets) {
    const pdbType = ops.registry.byKind("policy/v1", "PodDisruptionBudget")!;
    const pdbs = (listObjects(ops, pdbType, namespace, new URLSearchParams()).items as Obj[]).filter((b) => {
      const sel = (b.spec as Obj | undefined)?.selector as Obj | undefined;
      // A budget without a selector selects nothing; policy/v1's empty selector selects everything.
      return sel !== undefined && labelSelector(selectorString(sel))(pod);
    });
    if (pdbs.length > 1) throw plainFailure(500, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.");
    const pdb = pdbs[0];
    if (pdb) {
      const pdbName = String((pdb.metadata as Obj).name);
      const st = (pdb.status ?? {}) as {
        observedGeneration?: number;
        disruptionsAllowed?: number;
        desiredHealthy?: number;
        currentHealthy?: number;
        disruptedPods?: Record<string, string>;
      };
      if ((st.observedGeneration ?? 0) < Number((pdb.metadata as Obj).generation ?? 0)) {
        throw evictionRefused(`The disruption budget ${pdbName} is still being processed by the server.`);
      }
      const allowed = st.disruptionsAllowed ?? 0;
      if (allowed < 0) throw forbidden({ group: "policy", resource: "poddisruptionbudget" }, pdbName, "pdb disruptions allowed is negative");
      if (allowed === 0) {
        throw evictionRefused(`The disruption budget ${pdbName} needs ${st.desiredHealthy ?? 0} healthy pods and has ${st.currentHealthy ?? 0} currently`);
      }
      const status = {
        ...st,
        disruptionsAllowed: allowed - 1,
        disruptedPods: { ...st.disruptedPods, [name]: new Date().toISOString().replace(/\.\d{3}Z$/, "Z") },
      };
      ops.update(pdbType, namespace, pdbName, { ...pdb, status }, { subresource: "status" });
    }
  }
  ops.delete(podType, namespace, name, deleteOptions);
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", code: 201 };
}

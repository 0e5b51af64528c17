// Where the controller may send a node's token: only to the sidecar pod that the CSIAddonsNode's
// own facts point at. Any node plugin may write a CSIAddonsNode in its namespace, so the object's
// word alone is untrusted: a forged one claiming node A at an endpoint its writer serves would
// receive node A's token and every call meant for A. So the pod behind a pod:// endpoint must be
// in the object's namespace, run on the node the object claims (spec.driver.nodeID, the node of
// the token's audience), be the pod the object says made it (createdByPodUID), belong to the
// object's owner, and run as an expected ServiceAccount when those are named. A plain host:port
// names no pod and cannot be verified: refused unless the operator chose so for local use.
import type { SidecarInfo, SidecarPod } from "../plan/types.js";
import type { Endpoint } from "./endpoint.js";
import { CREATED_BY_POD_UID } from "../plan/trigger.js";

export interface VerifyPolicy {
  /** "namespace/name" of the ServiceAccounts a sidecar pod may run as; empty: any. */
  serviceAccounts: readonly string[];
  /** Plain host:port endpoints are called unverified (unsafe: for local use only). */
  allowUnverified: boolean;
}

/** The kind of a refusal, as the metric labels it (bounded: never a name or an address). */
export type RefusalKind = "unverifiable" | "namespace" | "node" | "pod" | "owner" | "service-account";

/** A sidecar endpoint the controller will not call, and why. */
export class EndpointRefusedError extends Error {
  constructor(
    readonly kind: RefusalKind,
    message: string,
  ) {
    super(message);
    this.name = "EndpointRefusedError";
  }
}

/** Refuses a plain host:port unless the policy allows unverified endpoints. */
export function verifyAddress(s: SidecarInfo, policy: VerifyPolicy): void {
  if (policy.allowUnverified) return;
  throw new EndpointRefusedError(
    "unverifiable",
    `endpoint ${s.endpoint} names no pod, so it cannot be verified as node ${s.nodeId}'s sidecar; not called (only pod://<pod>.<namespace>:<port> is, unless --allow-unverified-endpoints)`,
  );
}

/** Throws EndpointRefusedError unless `pod` is the sidecar the CSIAddonsNode `s` may be served by. */
export function verifySidecarPod(s: SidecarInfo, ep: Extract<Endpoint, { kind: "pod" }>, pod: SidecarPod, policy: VerifyPolicy): void {
  const name = `pod ${ep.namespace}/${ep.pod}`;
  if (ep.namespace !== s.namespace) {
    throw new EndpointRefusedError("namespace", `endpoint names ${name}, outside the CSIAddonsNode's namespace ${s.namespace}; not called`);
  }
  if (pod.nodeName !== s.nodeId) {
    const where = pod.nodeName ? `runs on node ${pod.nodeName}` : "is not scheduled to a node";
    throw new EndpointRefusedError("node", `${name} ${where}, not on node ${s.nodeId} that the CSIAddonsNode claims; not called`);
  }
  const madeBy = s.annotations[CREATED_BY_POD_UID];
  if (madeBy && madeBy !== pod.uid) {
    throw new EndpointRefusedError("pod", `${name} is not the pod that made the CSIAddonsNode (uid ${madeBy}, the pod's is ${pod.uid}); not called`);
  }
  const owner = s.owners.find((o) => o.controller) ?? s.owners[0];
  const podController = pod.owners.find((o) => o.controller);
  if (!owner || !(owner.uid === pod.uid || (podController !== undefined && owner.uid === podController.uid))) {
    const has = owner ? `is owned by ${owner.kind} ${owner.name}` : "has no owner";
    throw new EndpointRefusedError("owner", `the CSIAddonsNode ${has}, which is neither ${name} nor its controller; not called`);
  }
  const sa = `${ep.namespace}/${pod.serviceAccount}`;
  if (policy.serviceAccounts.length > 0 && !policy.serviceAccounts.includes(sa)) {
    throw new EndpointRefusedError("service-account", `${name} runs as ServiceAccount ${sa}, not one of --sidecar-service-accounts; not called`);
  }
}

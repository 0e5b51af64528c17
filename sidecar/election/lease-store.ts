// The Lease of the shared elector over the sidecar's own Kubernetes access, written the way
// client-go writes it (MicroTime, whole seconds), because the upstream csi-addons controller reads it.
import type { LeaseRecord, LeaseStore } from "../../common/election/lease-elector.js";
import { KubeError, type KubeApi, type Lease } from "../kube/api.js";

/** MicroTime as the API server writes it: RFC 3339 with six fractional digits. */
const microTime = (ms: number) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
const parseTime = (t: string | undefined) => (t ? Date.parse(t) : 0);

export function leaseStore(kube: KubeApi, namespace: string, name: string): LeaseStore {
  return {
    async read(signal) {
      const lease = await kube.getLease(namespace, name, signal);
      if (!lease) return undefined;
      const s = lease.spec;
      return {
        holder: s.holderIdentity ?? "",
        durationMs: (s.leaseDurationSeconds ?? 0) * 1000,
        renewTimeMs: parseTime(s.renewTime),
        acquireTimeMs: parseTime(s.acquireTime),
        transitions: s.leaseTransitions ?? 0,
        resourceVersion: lease.metadata.resourceVersion ?? "",
      };
    },
    async write(r: LeaseRecord, resourceVersion, signal) {
      const lease: Lease = {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name, namespace, ...(resourceVersion ? { resourceVersion } : {}) },
        spec: {
          holderIdentity: r.holder,
          leaseDurationSeconds: Math.max(1, Math.ceil(r.durationMs / 1000)),
          acquireTime: microTime(r.acquireTimeMs),
          renewTime: microTime(r.renewTimeMs),
          leaseTransitions: r.transitions,
        },
      };
      try {
        await (resourceVersion ? kube.replaceLease(lease, signal) : kube.createLease(lease, signal));
        return true;
      } catch (err) {
        if (err instanceof KubeError && err.status === 409) return false;
        throw err;
      }
    },
  };
}

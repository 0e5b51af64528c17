// KubeApi over the REST paths the sidecar uses; every call carries the caller's AbortSignal.
import { KubeError, type CSIAddonsNode, type KubeApi, type Lease, type NodePod, type Watcher, type WatchEventType } from "./api.js";
import type { KubeTransport } from "./transport.js";

const CSI_ADDONS_NODES = "/apis/csiaddons.openshift.io/v1alpha1/namespaces";

export function createKubeApi(t: KubeTransport): KubeApi {
  const get = <T>(path: string, signal: AbortSignal) => t.request<T>("GET", path, undefined, signal);
  async function getOrUndefined<T>(path: string, signal: AbortSignal): Promise<T | undefined> {
    try {
      return await get<T>(path, signal);
    } catch (err) {
      if (err instanceof KubeError && err.status === 404) return undefined;
      throw err;
    }
  }
  const enc = encodeURIComponent;
  const leasePath = (ns: string, name = "") => `/apis/coordination.k8s.io/v1/namespaces/${enc(ns)}/leases${name ? `/${enc(name)}` : ""}`;
  const nodePath = (ns: string, name = "") => `${CSI_ADDONS_NODES}/${enc(ns)}/csiaddonsnodes${name ? `/${enc(name)}` : ""}`;

  function watcher<T>(collection: string): Watcher<T> {
    return ({ name, resourceVersion, signal }, onEvent) => {
      const q = new URLSearchParams({ watch: "true", fieldSelector: `metadata.name=${name}`, allowWatchBookmarks: "true" });
      if (resourceVersion) q.set("resourceVersion", resourceVersion);
      return t.watch(`${collection}?${q}`, signal, (e) => onEvent(e.type as WatchEventType, e.object as T));
    };
  }

  return {
    getPod: (ns, name, signal) => get(`/api/v1/namespaces/${enc(ns)}/pods/${enc(name)}`, signal),
    getReplicaSet: (ns, name, signal) => get(`/apis/apps/v1/namespaces/${enc(ns)}/replicasets/${enc(name)}`, signal),

    getCSIAddonsNode: (ns, name, signal) => getOrUndefined(nodePath(ns, name), signal),
    createCSIAddonsNode: (obj, signal) => t.request<CSIAddonsNode>("POST", nodePath(obj.metadata.namespace!), obj, signal),
    replaceCSIAddonsNode: (obj, signal) => t.request<CSIAddonsNode>("PUT", nodePath(obj.metadata.namespace!, obj.metadata.name!), obj, signal),
    deleteCSIAddonsNode: async (ns, name, uid, signal) => {
      await t.request("DELETE", nodePath(ns, name), { apiVersion: "v1", kind: "DeleteOptions", preconditions: { uid } }, signal);
    },
    watchCSIAddonsNode: (ns) => watcher(nodePath(ns)),

    getLease: (ns, name, signal) => getOrUndefined(leasePath(ns, name), signal),
    createLease: (obj, signal) => t.request<Lease>("POST", leasePath(obj.metadata.namespace!), obj, signal),
    replaceLease: (obj, signal) => t.request<Lease>("PUT", leasePath(obj.metadata.namespace!, obj.metadata.name!), obj, signal),

    getPersistentVolume: (name, signal) => getOrUndefined(`/api/v1/persistentvolumes/${enc(name)}`, signal),
    watchPersistentVolume: () => watcher("/api/v1/persistentvolumes"),
    getVolumeAttachment: (name, signal) => getOrUndefined(`/apis/storage.k8s.io/v1/volumeattachments/${enc(name)}`, signal),
    getCsiDriver: (name, signal) => getOrUndefined(`/apis/storage.k8s.io/v1/csidrivers/${enc(name)}`, signal),
    getNode: (name, signal) => getOrUndefined(`/api/v1/nodes/${enc(name)}`, signal),
    watchNode: () => watcher("/api/v1/nodes"),
    listPodsOnNode: async (nodeName, signal) => {
      // resourceVersion=0: the API server's watch cache answers (any version, never older than what
      // this client saw); without it each list is a quorum read from etcd (before Kubernetes 1.31).
      const q = new URLSearchParams({ fieldSelector: `spec.nodeName=${nodeName}`, resourceVersion: "0" });
      const list = await get<{ metadata: { resourceVersion: string }; items?: NodePod[] }>(`/api/v1/pods?${q}`, signal);
      return { resourceVersion: list.metadata.resourceVersion, items: list.items ?? [] };
    },
    watchPodsOnNode: ({ nodeName, resourceVersion, signal }, onEvent) => {
      const q = new URLSearchParams({ watch: "true", allowWatchBookmarks: "true", fieldSelector: `spec.nodeName=${nodeName}`, resourceVersion });
      return t.watch(`/api/v1/pods?${q}`, signal, (e) => onEvent(e.type as WatchEventType, e.object as NodePod));
    },
    getSecretData: async (ns, name, signal) => {
      const secret = await getOrUndefined<{ data?: Record<string, string> }>(`/api/v1/namespaces/${enc(ns)}/secrets/${enc(name)}`, signal);
      if (!secret) return undefined;
      return Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]));
    },

    reviewToken: async (token, audiences, signal) => {
      const review = await t.request<{
        status?: {
          authenticated?: boolean;
          audiences?: string[];
          user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
        };
      }>(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: audiences ? { token, audiences } : { token } },
        signal,
      );
      const st = review.status;
      if (!st?.authenticated || !st.user?.username) return undefined;
      // Asked for our audiences, an answer naming none of them is not ours; naming none at all, the
      // API says the token is valid for the API server's audience: not ours either (with
      // --auth-audience=...,@api-server that is reviewed, and accepted, on its own).
      if (audiences && !st.audiences?.some((a) => audiences.includes(a))) return undefined;
      return { username: st.user.username, uid: st.user.uid, groups: st.user.groups, ...(st.user.extra ? { extra: st.user.extra } : {}) };
    },
    reviewAccess: async (user, attrs, signal) => {
      const review = await t.request<{ status?: { allowed?: boolean } }>(
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
          apiVersion: "authorization.k8s.io/v1",
          kind: "SubjectAccessReview",
          // The extra too: an authorizer that reads it (a scoped token's scopes) judges the token, not its whole user.
          spec: { user: user.username, uid: user.uid, groups: user.groups, ...(user.extra ? { extra: user.extra } : {}), resourceAttributes: attrs },
        },
        signal,
      );
      return review.status?.allowed === true;
    },
  };
}

// KubeWrites over @kubernetes/client-node: every request carries a deadline (an AbortSignal the
// caller may end sooner), and errors become KubeRequestError with the API server's status.
import type http from "node:http";
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  StorageV1Api,
  Observable,
  PatchStrategy,
  V1MicroTime,
  type ConfigurationOptions,
  type V1Lease,
} from "@kubernetes/client-node";
import { KubeRequestError, type KubeWrites, type NodeClaim, type StoredLease } from "./api.js";
import type { OwnerRef } from "../plan/types.js";
import { claimsOfPod } from "../../common/kube/pod-claims.js";
import { jsonRequest, type JsonRequest } from "./json-request.js";
import { withDeadline } from "../../common/util/deadline.js";
import { httpStatusText } from "./status-text.js";
import { KeepAliveAgents } from "./keep-alive.js";

const CAN_GROUP = "csiaddons.openshift.io";
const CAN_VERSION = "v1alpha1";
const CAN_PLURAL = "csiaddonsnodes";
/** The reporting component of our Events (DESIGN 7.4). */
export const COMPONENT = "csi-addons-healer";
const REQUEST_TIMEOUT_MS = 15_000;

export function loadKubeConfig(kubeconfig: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (kubeconfig) kc.loadFromFile(kubeconfig);
  else kc.loadFromCluster();
  return kc;
}

/** One pool of API server connections for every request of this process (see keep-alive.ts). */
const agents = new KeepAliveAgents();

/** Our deadline, or the caller's signal, whichever ends first. */
const deadline = (signal: AbortSignal) => AbortSignal.any([signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]);

/** Request options: our deadline, a pooled connection and an optional content type. */
export function requestOptions(signal: AbortSignal, contentType?: string): ConfigurationOptions {
  const s = deadline(signal);
  return {
    middleware: [
      {
        pre: (ctx) => {
          ctx.setSignal(s);
          const agent = agents.share(ctx.getAgent() as http.Agent | undefined);
          if (agent) ctx.setAgent(agent);
          if (contentType) ctx.setHeaderParam("Content-Type", contentType);
          return new Observable(Promise.resolve(ctx));
        },
        post: (res) => new Observable(Promise.resolve(res)),
      },
    ],
    middlewareMergeStrategy: "append",
  };
}

/** The object, or undefined when the API answered 404. */
const unlessMissing = <T>(p: Promise<T>): Promise<T | undefined> =>
  p.catch((err: unknown) => (err instanceof KubeRequestError && err.status === 404 ? undefined : Promise.reject(err)));

/** metadata.ownerReferences as the plan's views carry them. */
const ownersOf = (meta: { ownerReferences?: { kind: string; name: string; uid: string; controller?: boolean }[] } | undefined): OwnerRef[] =>
  (meta?.ownerReferences ?? []).map((o) => ({ kind: o.kind, name: o.name, uid: o.uid, ...(o.controller ? { controller: true } : {}) }));

/** Why the Eviction API refused (429): its DisruptionBudget cause, else its message. */
function evictionCause(body: unknown): string {
  try {
    const st = (typeof body === "string" ? JSON.parse(body) : body) as { message?: string; details?: { causes?: { message?: string }[] } };
    return st.details?.causes?.[0]?.message ?? st.message ?? "the pod's disruption budget allows no disruption now";
  } catch {
    return "the pod's disruption budget allows no disruption now";
  }
}

async function request<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof ApiException) throw new KubeRequestError(err.code, `${what}: ${httpStatusText(err.code, err.body)}`);
    throw new KubeRequestError(0, `${what}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export function createKubeWrites(kc: KubeConfig): KubeWrites {
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  const storage = kc.makeApiClient(StorageV1Api);
  /** One plain JSON request (json-request.ts) within our deadline, its timer released when it is answered. */
  const json = <T>(r: Omit<JsonRequest, "signal">, signal: AbortSignal): Promise<T> =>
    withDeadline(REQUEST_TIMEOUT_MS, signal, (s) => jsonRequest<T>(kc, agents, { ...r, signal: s }));
  return {
    async patchCSIAddonsNodeAnnotation(namespace, name, key, value, signal) {
      await request(`patch CSIAddonsNode ${namespace}/${name}`, () =>
        custom.patchNamespacedCustomObject(
          { group: CAN_GROUP, version: CAN_VERSION, plural: CAN_PLURAL, namespace, name, body: { metadata: { annotations: { [key]: value } } } },
          requestOptions(signal, PatchStrategy.MergePatch),
        ),
      );
    },
    async sidecarPod(namespace, name, signal) {
      const pod = await request(`get Pod ${namespace}/${name}`, () => core.readNamespacedPod({ namespace, name }, requestOptions(signal)));
      return {
        uid: pod.metadata?.uid ?? "",
        nodeName: pod.spec?.nodeName ?? "",
        ip: pod.status?.podIP || undefined,
        serviceAccount: pod.spec?.serviceAccountName || "default",
        owners: ownersOf(pod.metadata),
      };
    },
    async podToRestart(namespace, name, signal) {
      const pod = await unlessMissing(request(`get Pod ${namespace}/${name}`, () => core.readNamespacedPod({ namespace, name }, requestOptions(signal))));
      if (!pod) return undefined;
      return {
        uid: pod.metadata?.uid ?? "",
        nodeName: pod.spec?.nodeName ?? "",
        owners: ownersOf(pod.metadata),
        annotations: pod.metadata?.annotations ?? {},
      };
    },
    async namespaceAnnotations(namespace, signal) {
      const ns = await unlessMissing(request(`get Namespace ${namespace}`, () => core.readNamespace({ name: namespace }, requestOptions(signal))));
      return ns?.metadata?.annotations ?? {};
    },
    async evictPod(namespace, name, uid, signal) {
      // The UID as a precondition: a pod made again under the name (a StatefulSet's) is not the one meant.
      const body = { apiVersion: "policy/v1", kind: "Eviction", metadata: { name, namespace }, deleteOptions: { preconditions: { uid } } };
      try {
        await core.createNamespacedPodEviction({ namespace, name, body }, requestOptions(signal));
        return "evicted";
      } catch (err) {
        if (err instanceof ApiException && (err.code === 404 || err.code === 409)) return "gone";
        if (err instanceof ApiException && err.code === 429) return { refused: evictionCause(err.body) };
        if (err instanceof ApiException) throw new KubeRequestError(err.code, `evict Pod ${namespace}/${name}: ${httpStatusText(err.code, err.body)}`);
        throw new KubeRequestError(0, `evict Pod ${namespace}/${name}: ${err instanceof Error ? err.message : String(err)}`);
      }
    },
    async podStartTime(namespace, name, signal) {
      const pod = await request(`get Pod ${namespace}/${name}`, () => core.readNamespacedPod({ namespace, name }, requestOptions(signal)));
      const t = pod.status?.startTime ? new Date(pod.status.startTime).getTime() : NaN;
      return Number.isFinite(t) ? t : undefined;
    },
    async claimsOnNode(nodeName, signal) {
      // resourceVersion=0: served from the API server's watch cache; without it every pass of every
      // node would be a quorum read from etcd (before Kubernetes 1.31).
      const list = await request(`list Pods on node ${nodeName}`, () =>
        core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}`, resourceVersion: "0" }, requestOptions(signal)),
      );
      const since = new Map<string, number | undefined>();
      for (const pod of list.items) {
        const t = pod.status?.startTime ? new Date(pod.status.startTime).getTime() : undefined;
        for (const claim of claimsOfPod(pod)) {
          const was = since.get(claim);
          since.set(claim, was === undefined ? t : t === undefined ? was : Math.min(was, t));
        }
      }
      return [...since].map(([claim, t]): NodeClaim => ({ claim, since: t }));
    },
    async attachRequired(driver, signal) {
      try {
        const d = await storage.readCSIDriver({ name: driver }, requestOptions(signal));
        return d.spec?.attachRequired !== false;
      } catch (err) {
        if (err instanceof ApiException && err.code === 404) return true;
        throw new KubeRequestError(
          err instanceof ApiException ? err.code : 0,
          `get CSIDriver ${driver}: ${err instanceof ApiException ? httpStatusText(err.code, err.body) : (err as Error).message}`,
        );
      }
    },
    // Events through jsonRequest, not client-node's generated client: they are the one write of
    // every heal, and that path costs half the CPU (json-request.ts).
    async createEvent(namespace, e, signal) {
      const now = new Date().toISOString();
      // The wire form (RFC 3339 times), not client-node's model, which would want Date objects.
      const body = {
        apiVersion: "v1",
        kind: "Event",
        metadata: { generateName: `${e.involved.name}.`, namespace },
        involvedObject: {
          kind: e.involved.kind,
          apiVersion: e.involved.apiVersion,
          name: e.involved.name,
          namespace: e.involved.namespace,
          uid: e.involved.uid,
        },
        ...(e.related ? { related: e.related } : {}),
        type: e.type,
        reason: e.reason,
        message: e.message,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: COMPONENT },
        reportingComponent: COMPONENT,
        reportingInstance: COMPONENT,
      };
      const created = await json<{ metadata?: { name?: string } }>(
        {
          what: `create Event in ${namespace}`,
          method: "POST",
          path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`,
          body,
        },
        signal,
      );
      return created.metadata?.name ?? "";
    },
    async bumpEvent(namespace, name, count, signal) {
      await json(
        {
          what: `patch Event ${namespace}/${name}`,
          method: "PATCH",
          path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/events/${encodeURIComponent(name)}`,
          body: { count, lastTimestamp: new Date().toISOString() },
          contentType: PatchStrategy.MergePatch,
        },
        signal,
      );
    },
    async requestToken(namespace, name, audiences, expirationSeconds, signal) {
      const what = `create token for ServiceAccount ${namespace}/${name}`;
      const tr = await json<{ status?: { token?: string; expirationTimestamp?: string } }>(
        {
          what,
          method: "POST",
          path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(name)}/token`,
          body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { audiences, expirationSeconds } },
        },
        signal,
      );
      const expiresAtMs = Date.parse(tr.status?.expirationTimestamp ?? "");
      if (!tr.status?.token || Number.isNaN(expiresAtMs)) throw new KubeRequestError(201, `${what}: the answer has no token or expirationTimestamp`);
      return { token: tr.status.token, expiresAtMs };
    },
    async readLease(namespace, name, signal) {
      const lease = await unlessMissing(
        request(`get Lease ${namespace}/${name}`, () => coordination.readNamespacedLease({ namespace, name }, requestOptions(signal))),
      );
      return lease && fromLease(lease);
    },
    async writeLease(namespace, name, l, resourceVersion, signal) {
      const body: V1Lease = {
        metadata: { name, namespace, ...(resourceVersion ? { resourceVersion } : {}) },
        spec: {
          holderIdentity: l.holder,
          leaseDurationSeconds: Math.max(1, Math.round(l.durationMs / 1000)),
          acquireTime: new V1MicroTime(l.acquireTimeMs),
          renewTime: new V1MicroTime(l.renewTimeMs),
          leaseTransitions: l.transitions,
        },
      };
      try {
        await request(`write Lease ${namespace}/${name}`, () =>
          resourceVersion
            ? coordination.replaceNamespacedLease({ namespace, name, body }, requestOptions(signal))
            : coordination.createNamespacedLease({ namespace, body }, requestOptions(signal)),
        );
        return true;
      } catch (err) {
        if (err instanceof KubeRequestError && err.status === 409) return false;
        throw err;
      }
    },
  };
}

function fromLease(lease: V1Lease): StoredLease {
  const spec = lease.spec ?? {};
  const time = (t: unknown) => (t ? new Date(t as string | Date).getTime() : 0);
  return {
    holder: spec.holderIdentity ?? "",
    renewTimeMs: time(spec.renewTime),
    acquireTimeMs: time(spec.acquireTime),
    durationMs: (spec.leaseDurationSeconds ?? 0) * 1000,
    transitions: spec.leaseTransitions ?? 0,
    resourceVersion: lease.metadata?.resourceVersion ?? "",
  };
}

// The only module that imports @kubernetes/client-node. It implements the narrow KubeApi with a
// deadline (AbortSignal) on every request and turns client errors into KubeError.
import * as k8s from "@kubernetes/client-node";
import { KubeError, type KubeApi, type Watcher, type WatchEventType } from "./api.js";

const GROUP = "csiaddons.openshift.io";
const VERSION = "v1alpha1";
const PLURAL = "csiaddonsnodes";

/**
 * Per-request options that tie the HTTP request to the caller's AbortSignal. The object-parameter
 * API hands these straight to the Observable API, so the middleware returns Observables.
 */
function withSignal(signal: AbortSignal): k8s.ConfigurationOptions {
  return {
    middleware: [
      {
        pre: (ctx: k8s.RequestContext) => {
          ctx.setSignal(signal as never);
          return new k8s.Observable(Promise.resolve(ctx));
        },
        post: (rsp: k8s.ResponseContext) => new k8s.Observable(Promise.resolve(rsp)),
      },
    ],
    middlewareMergeStrategy: "append",
  };
}

function toKubeError(err: unknown): KubeError {
  if (err instanceof KubeError) return err;
  if (err instanceof k8s.ApiException) {
    let reason = "";
    let message = `HTTP ${err.code}`;
    try {
      const body = JSON.parse(typeof err.body === "string" ? err.body : JSON.stringify(err.body)) as { reason?: string; message?: string };
      reason = body.reason ?? "";
      message = body.message ?? message;
    } catch {
      // Not a Status object (a proxy's HTML page, say): keep the HTTP code only.
    }
    return new KubeError(err.code, reason, message);
  }
  const e = err as { name?: string; code?: string; message?: string; statusCode?: number };
  if (e?.name === "AbortError") return new KubeError(0, "Timeout", "request to the Kubernetes API timed out or was cancelled");
  if (typeof e?.statusCode === "number") return new KubeError(e.statusCode, "", e.message ?? `HTTP ${e.statusCode}`);
  return new KubeError(0, "Unavailable", `Kubernetes API unreachable: ${e?.code ?? e?.message ?? String(err)}`);
}

async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toKubeError(err);
  }
}

async function orUndefined<T>(fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await call(fn);
  } catch (err) {
    if (err instanceof KubeError && err.status === 404) return undefined;
    throw err;
  }
}

export function loadKubeConfig(kubeconfigPath: string | undefined): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
  else kc.loadFromCluster();
  return kc;
}

export function createKubeApi(kc: k8s.KubeConfig): KubeApi {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const apps = kc.makeApiClient(k8s.AppsV1Api);
  const storage = kc.makeApiClient(k8s.StorageV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const authn = kc.makeApiClient(k8s.AuthenticationV1Api);
  const authz = kc.makeApiClient(k8s.AuthorizationV1Api);
  const watch = new k8s.Watch(kc);

  function watcher<T>(path: string): Watcher<T> {
    return ({ name, resourceVersion, signal }, onEvent) =>
      new Promise<void>((resolve, reject) => {
        if (signal.aborted) return resolve();
        let controller: AbortController | undefined;
        const onAbort = () => controller?.abort();
        signal.addEventListener("abort", onAbort, { once: true });
        const finish = (err: unknown) => {
          signal.removeEventListener("abort", onAbort);
          if (err && !signal.aborted) reject(toKubeError(err));
          else resolve();
        };
        watch
          .watch(
            path,
            { fieldSelector: `metadata.name=${name}`, resourceVersion, allowWatchBookmarks: true },
            (type: string, obj: unknown) => {
              if (type === "ERROR") {
                const st = obj as { code?: number; reason?: string; message?: string };
                controller?.abort();
                finish(new KubeError(st.code ?? 500, st.reason ?? "", st.message ?? "watch error"));
                return;
              }
              onEvent(type as WatchEventType, obj as T);
            },
            (err: unknown) => finish(err),
          )
          .then((c) => {
            controller = c;
            if (signal.aborted) c.abort();
          }, finish);
      });
  }

  return {
    getPod: (namespace, name, signal) => call(() => core.readNamespacedPod({ namespace, name }, withSignal(signal))) as never,
    getReplicaSet: (namespace, name, signal) =>
      call(() => apps.readNamespacedReplicaSet({ namespace, name }, withSignal(signal))) as never,

    getCSIAddonsNode: (namespace, name, signal) =>
      orUndefined(() => custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name }, withSignal(signal))),
    createCSIAddonsNode: (body, signal) =>
      call(() =>
        custom.createNamespacedCustomObject(
          { group: GROUP, version: VERSION, plural: PLURAL, namespace: body.metadata.namespace!, body },
          withSignal(signal),
        ),
      ),
    replaceCSIAddonsNode: (body, signal) =>
      call(() =>
        custom.replaceNamespacedCustomObject(
          { group: GROUP, version: VERSION, plural: PLURAL, namespace: body.metadata.namespace!, name: body.metadata.name!, body },
          withSignal(signal),
        ),
      ),
    deleteCSIAddonsNode: async (namespace, name, uid, signal) => {
      await call(() =>
        custom.deleteNamespacedCustomObject(
          { group: GROUP, version: VERSION, plural: PLURAL, namespace, name, body: { preconditions: { uid } } },
          withSignal(signal),
        ),
      );
    },
    watchCSIAddonsNode: (namespace) => watcher(`/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURAL}`),

    getPersistentVolume: (name, signal) => orUndefined(() => core.readPersistentVolume({ name }, withSignal(signal))) as never,
    getVolumeAttachment: (name, signal) => orUndefined(() => storage.readVolumeAttachment({ name }, withSignal(signal))) as never,
    getNode: (name, signal) => orUndefined(() => core.readNode({ name }, withSignal(signal))) as never,
    watchNode: () => watcher("/api/v1/nodes"),
    getSecretData: async (namespace, name, signal) => {
      const secret = await orUndefined(() => core.readNamespacedSecret({ namespace, name }, withSignal(signal)));
      if (!secret) return undefined;
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, "base64").toString("utf8");
      for (const [k, v] of Object.entries(secret.stringData ?? {})) out[k] = v;
      return out;
    },

    reviewToken: async (token, audience, signal) => {
      const review = await call(() =>
        authn.createTokenReview(
          { body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token, audiences: [audience] } } },
          withSignal(signal),
        ),
      );
      const st = review.status;
      if (!st?.authenticated || !st.user?.username) return undefined;
      if (st.audiences && !st.audiences.includes(audience)) return undefined;
      return { username: st.user.username, uid: st.user.uid, groups: st.user.groups };
    },
    reviewAccess: async (user, attrs, signal) => {
      const review = await call(() =>
        authz.createSubjectAccessReview(
          {
            body: {
              apiVersion: "authorization.k8s.io/v1",
              kind: "SubjectAccessReview",
              spec: { user: user.username, uid: user.uid, groups: user.groups, resourceAttributes: attrs },
            },
          },
          withSignal(signal),
        ),
      );
      return review.status?.allowed === true;
    },
  };
}

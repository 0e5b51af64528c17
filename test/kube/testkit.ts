// Shared setup for the kube-api tests: a server per suite, @kubernetes/client-node clients bound
// to a kubeconfig, and helpers that turn a rejected call into (HTTP code, parsed Status) so each
// test can assert the exact answer a real API server gives.
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  ApiException,
  ApiextensionsV1Api,
  AppsV1Api,
  AuthenticationV1Api,
  AuthorizationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  loadAllYaml,
  PatchStrategy,
  setHeaderOptions,
  StorageV1Api,
  Watch,
} from "@kubernetes/client-node";
import { after, before } from "node:test";
import { type KubeApi, type KubeApiOptions, startKubeApi } from "./server.js";
import type { Status } from "./status.js";

export const upstreamCrdFile = fileURLToPath(new URL("../support/fixtures/upstream-csiaddonsnodes-crd.yaml", import.meta.url));
export const ownCrdFile = fileURLToPath(new URL("../../deploy/components/crd/csiaddons.openshift.io_csiaddonsnodes.yaml", import.meta.url));
/** The CRDs the project must work with; ours only once a colleague has written it. */
export const crdFiles = existsSync(ownCrdFile) ? [upstreamCrdFile, ownCrdFile] : [upstreamCrdFile];
/** The upstream CRD as client-node's typed model (loadAllYaml maps x-kubernetes-* to its field names). */
export const upstreamCrd = (): any => loadAllYaml(readFileSync(upstreamCrdFile, "utf8"))[0];

export const G = "csiaddons.openshift.io";
export const V = "v1alpha1";
export const P = "csiaddonsnodes";

export function clients(kubeconfigPath: string) {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return {
    kc,
    custom: kc.makeApiClient(CustomObjectsApi),
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    storage: kc.makeApiClient(StorageV1Api),
    coordination: kc.makeApiClient(CoordinationV1Api),
    crds: kc.makeApiClient(ApiextensionsV1Api),
    authn: kc.makeApiClient(AuthenticationV1Api),
    authz: kc.makeApiClient(AuthorizationV1Api),
    watch: new Watch(kc),
  };
}
export type Clients = ReturnType<typeof clients>;

export const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
export const jsonPatch = setHeaderOptions("Content-Type", PatchStrategy.JsonPatch);
export const strategicPatch = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);

/** Awaits a call that must fail; returns its HTTP code and the Status object it carried. */
export async function failure(p: Promise<unknown>): Promise<{ code: number; status: Status }> {
  try {
    await p;
  } catch (err) {
    if (!(err instanceof ApiException)) throw err;
    const raw = err.body as unknown;
    const status = (typeof raw === "string" && raw !== "" ? JSON.parse(raw) : raw) as Status;
    return { code: err.code, status };
  }
  throw new Error("expected the call to fail, it succeeded");
}

export function csiNode(name: string, namespace = "default", driver: Record<string, unknown> = {}): Record<string, any> {
  return {
    apiVersion: `${G}/${V}`,
    kind: "CSIAddonsNode",
    metadata: { name, namespace },
    spec: { driver: { name: "rbd.csi.ceph.com", endpoint: "pod://plugin-0.default:9070", nodeID: "node-1", ...driver } },
  };
}

/** CustomObjectsApi arguments for one CSIAddonsNode. */
export const cn = (name: string, namespace = "default") => ({ group: G, version: V, plural: P, namespace, name });

export interface WatchEvent {
  type: string;
  object: any;
}

/** Starts a client-node Watch and records its events; `ended` resolves when the stream ends. */
export async function recordWatch(w: Watch, path: string, query: Record<string, string | number | boolean | undefined> = {}) {
  const events: WatchEvent[] = [];
  let resolveEnded!: (err: unknown) => void;
  const ended = new Promise<unknown>((r) => (resolveEnded = r));
  const controller = await w.watch(
    path,
    query,
    (type, object) => events.push({ type, object }),
    (err) => resolveEnded(err),
  );
  return { events, ended, abort: () => controller.abort() };
}

export const nodesPath = (ns = "default") => `/apis/${G}/${V}/namespaces/${ns}/${P}`;

/**
 * Starts a server before a test file's tests and stops it after them; `setup` receives it with
 * admin clients (and may seed more) before any test runs.
 */
export function kubeSuite(opts: KubeApiOptions, setup: (k: { api: KubeApi; c: Clients }) => Promise<void>): void {
  let api: KubeApi | undefined;
  before(async () => {
    api = await startKubeApi(opts);
    await setup({ api, c: clients(api.kubeconfigPath) });
  });
  after(() => api?.stop());
}

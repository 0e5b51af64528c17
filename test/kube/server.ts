// startKubeApi: the in-memory Kubernetes API server's lifecycle and programmatic surface — HTTP
// (or HTTPS) listener on 127.0.0.1, kubeconfigs, seeding, direct access for test setup, request
// counters, fault injection (including taking the whole server down and up on the same port)
// and the auth tables.
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { createServer as createHttp, type Server } from "node:http";
import { createSecureServer } from "node:http2";
import type { AddressInfo, Socket } from "node:net";
import { Auth, type Rule, type TokenUser } from "./auth.js";
import { installControllers } from "./controllers.js";
import { Counters, FaultPlan, type Match } from "./faults.js";
import { metaOf, type Obj } from "./json.js";
import { writeKubeconfigFile } from "./kubeconfig.js";
import { Ops } from "./ops.js";
import { handle } from "./pipeline.js";
import { Registry } from "./registry.js";
import { type ResourceType, storageKey } from "./resources.js";
import { readManifests, seedOrder } from "./seed.js";
import { Store } from "./store.js";
import { selfSignedCert } from "./tls.js";
import { tempDir } from "../support/proc.js";

export interface KubeApiOptions {
  port?: number;
  seed?: unknown[];
  seedFiles?: string[];
  crdFiles?: string[];
  requireRbac?: boolean;
  /**
   * HTTPS with a fresh self-signed certificate whose CA data goes into the kubeconfigs (default).
   * false = plain HTTP; the kubeconfigs then say insecure-skip-tls-verify, without which neither
   * @kubernetes/client-node nor kubectl would talk to it (they refuse tokens over plain HTTP).
   */
  tls?: boolean;
  /** Events kept per resource for watch resumption (its watch cache), and revisions kept in all for paginated lists; older resourceVersions answer 410 Gone. */
  historySize?: number;
}

export interface KubeApi {
  url: string;
  adminToken: string;
  kubeconfigPath: string;
  writeKubeconfig(token: string, user?: string): string;
  stop(): Promise<void>;
  create(obj: unknown): Promise<object>;
  get(apiVersion: string, kind: string, namespace: string | undefined, name: string): object | undefined;
  update(obj: unknown): object;
  delete(apiVersion: string, kind: string, namespace: string | undefined, name: string): void;
  list(apiVersion: string, kind: string, namespace?: string): object[];
  /** TCP connections accepted since the start (a client that pools its connections opens few). */
  connectionsAccepted(): number;
  /** TCP connections open now. */
  connectionsOpen(): number;
  counters: Pick<Counters, "withResourceVersion" | "byName" | "events" | "eventsByUser"> & {
    get(verb: string, resource: string): number;
    total(filter?: { verb?: string; resource?: string }): number;
    reset(): void;
    snapshot(): Record<string, number>;
    byUser(): Record<string, Record<string, number>>;
  };
  faults: {
    failNext(n: number, status: 500 | 503 | 429, match?: Match): void;
    latency(ms: number, match?: Match): void;
    clear(): void;
    dropWatches(): void;
    down(): Promise<void>;
    up(): Promise<void>;
  };
  auth: {
    addToken(token: string, user: TokenUser): void;
    allow(username: string, rule: Rule): void;
    clearRules(username?: string): void;
    setRequireRbac(on: boolean): void;
    setMaxTokenExpiration(seconds: number | undefined): void;
    tokensOf(username: string): { token: string; audiences: string[] }[];
  };
}

/** Namespaces every cluster has. */
const defaultNamespaces = ["default", "kube-system", "kube-public", "kube-node-lease"];

export async function startKubeApi(opts: KubeApiOptions = {}): Promise<KubeApi> {
  const registry = new Registry();
  const store = new Store(opts.historySize ?? 1000);
  const ops = new Ops(registry, store);
  installControllers(ops);
  const adminToken = randomBytes(24).toString("hex");
  const auth = new Auth(adminToken, opts.requireRbac ?? false);
  const counters = new Counters();
  const faults = new FaultPlan();
  const dir = tempDir("kube-api-");

  const typeOf = (apiVersion: string, kind: string): ResourceType => {
    const t = registry.byKind(apiVersion, kind);
    if (!t) throw new Error(`no kind "${kind}" is registered for version "${apiVersion}"`);
    return t;
  };
  const nsOf = (t: ResourceType, o: Obj) => (t.namespaced ? String(metaOf(o).namespace ?? "default") : undefined);
  const direct = {
    async create(obj: unknown): Promise<object> {
      const o = obj as Obj;
      const t = typeOf(String(o.apiVersion), String(o.kind));
      return ops.create(t, nsOf(t, o), o, { direct: true }).obj;
    },
    get(apiVersion: string, kind: string, namespace: string | undefined, name: string): object | undefined {
      const t = typeOf(apiVersion, kind);
      const o = store.get(storageKey(t), t.namespaced ? namespace : undefined, name);
      return o && ops.present(t, o);
    },
    update(obj: unknown): object {
      const o = obj as Obj;
      const t = typeOf(String(o.apiVersion), String(o.kind));
      return ops.update(t, nsOf(t, o), String(metaOf(o).name), o, { direct: true }).obj;
    },
    delete(apiVersion: string, kind: string, namespace: string | undefined, name: string): void {
      const t = typeOf(apiVersion, kind);
      ops.delete(t, t.namespaced ? namespace : undefined, name);
    },
    list(apiVersion: string, kind: string, namespace?: string): object[] {
      const t = typeOf(apiVersion, kind);
      return store.list(storageKey(t), t.namespaced ? namespace : undefined).map((o) => ops.present(t, o));
    },
  };

  for (const name of defaultNamespaces) await direct.create({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
  const seeds = [...(opts.crdFiles ?? []), ...(opts.seedFiles ?? [])].flatMap((f) => readManifests(f));
  for (const o of seedOrder([...seeds, ...((opts.seed ?? []) as Obj[])])) {
    // Seeds may repeat the namespaces every cluster has.
    if (o.apiVersion === "v1" && o.kind === "Namespace" && defaultNamespaces.includes(String(metaOf(o).name))) continue;
    await direct.create(o);
  }

  const cert = opts.tls === false ? undefined : await selfSignedCert();
  const sockets = new Set<Socket>();
  let accepted = 0;
  let url = "";
  const deps = { ops, auth, counters, faults, host: () => url.replace(/^https?:\/\//, "") };
  const onRequest = (req: Parameters<typeof handle>[1], res: Parameters<typeof handle>[2]) => void handle(deps, req, res);
  let server: Server | ReturnType<typeof createSecureServer>;
  const listen = async (port: number) => {
    // Over TLS both HTTP/2 (what client-go and the sidecar speak) and HTTP/1.1, chosen by ALPN, as
    // the real API server does.
    // As kube-apiserver: at most 100 streams at once on one HTTP/2 connection (its default since the
    // HTTP/2 rapid-reset fixes), so a client that holds many watches must spread them, and buffers
    // for all of them (its 256 KiB per stream; node's default of 10 MB per session ended the
    // session of a sidecar holding 200 watches with ENHANCE_YOUR_CALM, which the real server does not).
    server = cert
      ? createSecureServer({ key: cert.key, cert: cert.cert, allowHTTP1: true, settings: { maxConcurrentStreams: 100 }, maxSessionMemory: 32 }, onRequest)
      : createHttp(onRequest);
    server.on("connection", (s: Socket) => {
      sockets.add(s);
      accepted++;
      s.once("close", () => sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    return (server.address() as AddressInfo).port;
  };
  const port = await listen(opts.port ?? 0);
  url = `${cert ? "https" : "http"}://127.0.0.1:${port}`;
  let up = true;

  const down = async () => {
    if (!up) return;
    up = false;
    const closed = new Promise<void>((r) => server.close(() => r()));
    store.closeWatchers();
    for (const s of sockets) s.destroy();
    if ("closeAllConnections" in server) server.closeAllConnections();
    await closed;
  };

  const writeKubeconfig = (token: string, user = "user") => writeKubeconfigFile(dir, url, user, token, cert?.caData);
  return {
    url,
    adminToken,
    kubeconfigPath: writeKubeconfig(adminToken, "admin"),
    writeKubeconfig,
    async stop() {
      await down();
      rmSync(dir, { recursive: true, force: true });
    },
    ...direct,
    connectionsAccepted: () => accepted,
    connectionsOpen: () => sockets.size,
    counters,
    faults: {
      failNext: (n, status, match) => faults.failNext(n, status, match),
      latency: (ms, match) => faults.latency(ms, match),
      clear: () => faults.clear(),
      dropWatches: () => store.closeWatchers(),
      down,
      async up() {
        if (up) return;
        await listen(port);
        up = true;
      },
    },
    auth: {
      addToken: (token, user) => auth.addToken(token, user),
      allow: (username, rule) => auth.allow(username, rule),
      clearRules: (username) => auth.clearRules(username),
      setRequireRbac: (on) => (auth.requireRbac = on),
      setMaxTokenExpiration: (seconds) => (auth.maxTokenExpirationSeconds = seconds),
      tokensOf: (username) => auth.tokensOf(username),
    },
  };
}

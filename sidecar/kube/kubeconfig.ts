// A kubeconfig's current context as a KubeEndpoint, for a sidecar outside a cluster (local runs,
// tests, the bench). A kubeconfig is YAML, and JSON is YAML: a JSON file is read with JSON.parse,
// and the YAML parser (157 KB of bundle to compile) is loaded only for a file that needs it.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { commonJs } from "../util/common-js.js";
import { KubeConfigError, tokenFile, type KubeEndpoint } from "./endpoint.js";

/** The current context of a kubeconfig file: server, CA, token or client certificate. */
export async function kubeconfigEndpoint(path: string): Promise<KubeEndpoint> {
  const text = readFileSync(path, "utf8");
  /* eslint-disable @typescript-eslint/no-explicit-any -- a kubeconfig is free-form YAML, read by key and checked where used */
  const doc = (text.trimStart().startsWith("{") ? JSON.parse(text) : commonJs(await import("yaml")).parse(text)) as Record<string, any>;
  const base = dirname(path);
  const named = (list: unknown, name: string, what: string): Record<string, any> => {
    /* eslint-enable @typescript-eslint/no-explicit-any */
    const hit = (Array.isArray(list) ? list : []).find((e: { name?: string }) => e?.name === name);
    if (!hit) throw new KubeConfigError(`kubeconfig ${path}: ${what} ${JSON.stringify(name)} not found`);
    return hit;
  };
  const ctx = named(doc["contexts"], doc["current-context"], "context").context ?? {};
  const cluster = named(doc["clusters"], ctx.cluster, "cluster").cluster ?? {};
  const user = ctx.user ? (named(doc["users"], ctx.user, "user").user ?? {}) : {};
  const bytes = (data: string | undefined, file: string | undefined) =>
    data ? Buffer.from(data, "base64") : file ? readFileSync(resolve(base, file)) : undefined;
  if (user.exec || user["auth-provider"] || user.username) {
    throw new KubeConfigError(`kubeconfig ${path}: only token, tokenFile and client-certificate users are supported`);
  }
  const token: string | undefined = user.token;
  return {
    server: new URL(cluster.server),
    ca: bytes(cluster["certificate-authority-data"], cluster["certificate-authority"]),
    cert: bytes(user["client-certificate-data"], user["client-certificate"]),
    key: bytes(user["client-key-data"], user["client-key"]),
    insecureSkipTlsVerify: cluster["insecure-skip-tls-verify"] === true,
    token: user.tokenFile ? tokenFile(resolve(base, user.tokenFile)) : () => token,
  };
}

// Where the API server is and how to authenticate to it. In a cluster: the pod's service-account
// credentials. Outside (local runs, tests, the bench): a kubeconfig, read by kubeconfig.ts, which
// loads a YAML parser only for a YAML file: a sidecar in a cluster never loads (or compiles) one.
import { readFileSync } from "node:fs";

const SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
/** Bound service-account tokens rotate; the kubelet rewrites the file well before expiry. */
const TOKEN_REREAD_MS = 60_000;

export interface KubeEndpoint {
  server: URL;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecureSkipTlsVerify?: boolean;
  /** Bearer token, re-read from its file when it came from one. */
  token: () => string | undefined;
}

export class KubeConfigError extends Error {}

/** In-cluster credentials, as every pod has them. */
export function inClusterEndpoint(host: string | undefined, port: string | undefined): KubeEndpoint {
  if (!host || !port) throw new KubeConfigError("not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset) and no --kubeconfig given");
  const h = host.includes(":") ? `[${host}]` : host;
  return { server: new URL(`https://${h}:${port}`), ca: readFileSync(`${SA_DIR}/ca.crt`), token: tokenFile(`${SA_DIR}/token`) };
}

/**
 * A token read from a file, re-read every TOKEN_REREAD_MS (the kubelet rotates it) rather than at
 * every request. `now` is the clock (a test's).
 */
export function tokenFile(path: string, now: () => number = Date.now): () => string {
  let cached = "";
  let at = -Infinity;
  return () => {
    if (now() - at > TOKEN_REREAD_MS) {
      cached = readFileSync(path, "utf8").trim();
      at = now();
    }
    return cached;
  };
}

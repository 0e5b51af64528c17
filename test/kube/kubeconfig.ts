// kubeconfig files for the server: one for the admin token, more for other identities, so a
// process under test can be started with the credentials a test gives it. JSON (which is YAML, so
// kubectl and client-node read it too): the sidecar then reads it without loading its YAML parser,
// as in a cluster, where it reads no kubeconfig at all; the bench measures its start-up this way.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export function kubeconfigJson(server: string, user: string, token: string, caData?: string): string {
  const cluster: Record<string, string | boolean> = { server };
  if (caData) cluster["certificate-authority-data"] = caData;
  else if (server.startsWith("http:")) cluster["insecure-skip-tls-verify"] = true;
  return JSON.stringify(
    {
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "kube-api", cluster }],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: `${user}@kube-api`, context: { cluster: "kube-api", user, namespace: "default" } }],
      "current-context": `${user}@kube-api`,
      preferences: {},
    },
    null,
    2,
  );
}

let counter = 0;

/** Writes a kubeconfig into `dir` and returns its path. */
export function writeKubeconfigFile(dir: string, server: string, user: string, token: string, caData?: string): string {
  const safe = user.replace(/[^A-Za-z0-9._-]/g, "_");
  const path = join(dir, `kubeconfig-${safe}-${++counter}.json`);
  writeFileSync(path, kubeconfigJson(server, user, token, caData), { mode: 0o600 });
  return path;
}

/** The parts of a kubeconfig a test edits. */
export interface KubeconfigJson {
  clusters: { cluster: Record<string, unknown> }[];
  users: { user: Record<string, unknown> }[];
}

/** Writes to `to` the kubeconfig at `from` as `edit` changes it, and returns `to`. */
export function editKubeconfig(from: string, to: string, edit: (config: KubeconfigJson) => void): string {
  const config = JSON.parse(readFileSync(from, "utf8")) as KubeconfigJson;
  edit(config);
  writeFileSync(to, JSON.stringify(config), { mode: 0o600 });
  return to;
}

// Discovery in the legacy formats client-go and client-node read, the OpenAPI v3 index kubectl
// consults before `apply`, and — when kubectl is installed — kubectl itself against the server.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, test } from "node:test";
import { ApisApi, CoreApi, VersionApi } from "@kubernetes/client-node";
import type { KubeApi } from "./server.js";
import { type Clients, kubeSuite, G, P, upstreamCrdFile, V } from "./testkit.js";
import { tempDir } from "../support/proc.js";

let api: KubeApi;
let c: Clients;
kubeSuite({ crdFiles: [upstreamCrdFile] }, async (k) => {
  ({ api, c } = k);
});

async function getJson(path: string): Promise<any> {
  const opts = await c.kc.applyToFetchOptions({});
  const { default: fetch } = await import("node-fetch");
  const res = await fetch(`${api.url}${path}`, opts as object);
  assert.equal(res.status, 200, path);
  return res.json();
}

describe("discovery", () => {
  test("/version, /api and /apis", async () => {
    const v = await c.kc.makeApiClient(VersionApi).getCode();
    assert.equal(v.major, "1");
    assert.match(v.gitVersion, /^v1\.\d+\.\d+/);
    const core = await c.kc.makeApiClient(CoreApi).getAPIVersions();
    assert.deepEqual(core.versions, ["v1"]);
    const groups = await c.kc.makeApiClient(ApisApi).getAPIVersions();
    const names = groups.groups.map((g) => g.name);
    for (const g of ["apps", "authentication.k8s.io", "authorization.k8s.io", "coordination.k8s.io", "storage.k8s.io", "apiextensions.k8s.io", G])
      assert.ok(names.includes(g), g);
    const ours = groups.groups.find((g) => g.name === G)!;
    assert.deepEqual({ ...ours.preferredVersion }, { groupVersion: `${G}/${V}`, version: V });
  });

  test("/api/v1 and /apis/<group>/<version> list resources with verbs, scope, kind and short names", async () => {
    const core = await c.core.getAPIResources();
    const pods = core.resources.find((r) => r.name === "pods")!;
    assert.deepEqual(
      { namespaced: pods.namespaced, kind: pods.kind, shortNames: pods.shortNames, verbs: pods.verbs },
      { namespaced: true, kind: "Pod", shortNames: ["po"], verbs: ["create", "delete", "get", "list", "patch", "update", "watch"] },
    );
    assert.deepEqual(core.resources.find((r) => r.name === "nodes/status")?.verbs, ["get", "patch", "update"]);
    assert.equal(core.resources.find((r) => r.name === "nodes")?.namespaced, false);
    const reviews = await c.authn.getAPIResources();
    assert.deepEqual(
      reviews.resources.map((r) => [r.name, r.verbs]),
      [["tokenreviews", ["create"]]],
    );
    const custom = await getJson(`/apis/${G}/${V}`);
    assert.equal(custom.kind, "APIResourceList");
    assert.deepEqual(
      custom.resources.map((r: any) => r.name),
      [P, `${P}/status`],
    );
    assert.equal(custom.resources[0].kind, "CSIAddonsNode");
  });

  test("/openapi/v3 indexes each group-version; its document declares PATCH with fieldValidation", async () => {
    const root = await getJson("/openapi/v3");
    assert.ok(root.paths[`apis/${G}/${V}`].serverRelativeURL.startsWith(`/openapi/v3/apis/${G}/${V}`));
    const doc = await getJson(root.paths[`apis/${G}/${V}`].serverRelativeURL);
    const op = doc.paths[`/apis/${G}/${V}/namespaces/{namespace}/${P}/{name}`].patch;
    assert.deepEqual(op["x-kubernetes-group-version-kind"], { group: G, version: V, kind: "CSIAddonsNode" });
    assert.ok(op.parameters.some((p: any) => p.name === "fieldValidation" && p.in === "query"));
  });
});

const run = promisify(execFile);
const kubectlPath = await run("sh", ["-c", "command -v kubectl"]).then(
  (r) => r.stdout.trim(),
  () => "",
);

describe("kubectl", { skip: kubectlPath ? false : "kubectl is not installed" }, () => {
  test("apply, get (table, -o json), and delete against the printed kubeconfig", async () => {
    const kubectl = (...args: string[]) => run(kubectlPath, ["--kubeconfig", api.kubeconfigPath, ...args], { timeout: 60_000 });
    const dir = tempDir();
    const file = join(dir, "objects.yaml");
    writeFileSync(
      file,
      [
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: kubectl-node\n",
        `apiVersion: ${G}/${V}\nkind: CSIAddonsNode\nmetadata:\n  name: kubectl-cn\n  namespace: default\nspec:\n  driver:\n    name: d.example.com\n    endpoint: pod://p.default:9070\n    nodeID: kubectl-node\n`,
      ].join("---\n"),
    );
    const applied = await kubectl("apply", "-f", file);
    assert.match(applied.stdout, /csiaddonsnode.csiaddons.openshift.io\/kubectl-cn created/);
    const table = await kubectl("get", "csiaddonsnodes", "-n", "default");
    assert.match(table.stdout, /^NAME\s+NAMESPACE\s+AGE\s+DRIVERNAME\s+ENDPOINT\s+NODEID\n/);
    assert.match(table.stdout, /kubectl-cn\s+default\s+\S+\s+d\.example\.com\s+pod:\/\/p\.default:9070\s+kubectl-node/);
    const json = JSON.parse((await kubectl("get", "node", "kubectl-node", "-o", "json")).stdout);
    assert.equal(json.metadata.name, "kubectl-node");
    const again = await kubectl("apply", "-f", file);
    assert.match(again.stdout, /csiaddonsnode.csiaddons.openshift.io\/kubectl-cn unchanged/);
    const deleted = await kubectl("delete", "-f", file);
    assert.match(deleted.stdout, /csiaddonsnode.csiaddons.openshift.io "kubectl-cn" deleted/);
    assert.equal(api.get(`${G}/${V}`, "CSIAddonsNode", "default", "kubectl-cn"), undefined);
  });
});

// deploy/: every manifest is valid Kubernetes, the kustomization covers exactly the files there,
// our CRD accepts what the upstream one accepts, the RBAC is the least the sidecar needs, and the
// example DaemonSet runs the sidecar locked down and wired the way its flags say.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, test } from "node:test";
import {
  deployDir,
  findOne,
  listManifestFiles,
  loadManifests,
  parseYamlDocuments,
  readKustomization,
  type K8sObject,
  type Manifest,
} from "./load.js";
import { loadRbacRules, sidecarServiceAccount, type Rule } from "./rbac.js";
import { crdSchemaTree, schemaDifferences, unknownSchemaKeywords, validateStrict } from "./validate.js";

const manifests = loadManifests();
const kustomization = readKustomization();
const clusterScoped = new Set(["Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"]);

describe("deploy/ manifests", () => {
  test("the kustomization lists every manifest file in deploy/, and only existing files", () => {
    for (const file of kustomization.resources) {
      assert.ok(existsSync(join(deployDir, file)) && statSync(join(deployDir, file)).isFile(), `${file} is not a file in deploy/`);
    }
    assert.deepEqual([...kustomization.resources].sort(), listManifestFiles());
    assert.equal(new Set(kustomization.resources).size, kustomization.resources.length, "a file is listed twice");
  });

  test("every document validates against its Kubernetes schema, with no unknown fields", () => {
    assert.ok(manifests.length >= 8, `only ${manifests.length} objects`);
    for (const { file, doc } of manifests) {
      const what = `${file}: ${doc.kind} ${doc.metadata?.name}`;
      const opaque = doc.kind === "CustomResourceDefinition" ? [crdSchemaTree] : [];
      assert.doesNotThrow(() => validateStrict(doc, opaque), what);
      assert.deepEqual(validateStrict(doc, opaque), [], `${what}: unknown fields`);
    }
  });

  test("namespaced objects are in the kustomization's namespace, which deploy/ creates", () => {
    findOne(manifests, "Namespace", kustomization.namespace);
    for (const { file, doc } of manifests) {
      if (clusterScoped.has(doc.kind)) assert.equal(doc.metadata.namespace, undefined, `${file}: ${doc.kind} is cluster-scoped`);
      else assert.equal(doc.metadata.namespace, kustomization.namespace, `${file}: ${doc.kind} ${doc.metadata.name}`);
    }
  });

  test("the strict checks catch what they are for", () => {
    const ds = structuredClone(findOne(manifests, "DaemonSet")) as DaemonSetDoc;
    Object.assign(ds.spec.template.spec.volumes[0], { hostPth: { path: "/x" } });
    assert.deepEqual(validateStrict(ds), ["/spec/template/spec/volumes/0/hostPth"]);
    Object.assign(ds.spec.template.spec.containers[0], { ports: [{ containerPort: "9070" }] });
    assert.throws(() => validateStrict(ds), /containerPort/);
    assert.throws(() => parseYamlDocuments("defaultMode: 0440\n", "octal.yaml"), /YAML 1.1 and 1.2/);
    assert.throws(() => parseYamlDocuments("a: 1\na: 2\n", "dup.yaml"), /dup.yaml/);
  });
});

describe("CSIAddonsNode CRD", () => {
  const upstreamFile = new URL("../fixtures/upstream-csiaddonsnodes-crd.yaml", import.meta.url).pathname;
  const [upstream] = parseYamlDocuments(readFileSync(upstreamFile, "utf8"), "upstream CRD") as CrdDoc[];
  const ours = findOne(manifests, "CustomResourceDefinition") as CrdDoc;

  test("same name, group, names, scope, versions, printer columns and subresources as upstream", () => {
    assert.equal(ours.metadata.name, upstream.metadata.name);
    assert.equal(ours.spec.group, upstream.spec.group);
    assert.deepEqual(ours.spec.names, upstream.spec.names);
    assert.equal(ours.spec.scope, upstream.spec.scope);
    assert.equal(ours.spec.conversion, upstream.spec.conversion);
    assert.deepEqual(
      ours.spec.versions.map(({ schema, ...rest }) => rest),
      upstream.spec.versions.map(({ schema, ...rest }) => rest),
    );
    assert.deepEqual(ours.spec.versions.map((v) => v.name), ["v1alpha1"]);
    assert.deepEqual(ours.spec.versions[0].subresources, { status: {} });
  });

  test("our schema accepts exactly what the upstream schema accepts (descriptions aside)", () => {
    const [u, o] = [upstream.spec.versions[0].schema.openAPIV3Schema, ours.spec.versions[0].schema.openAPIV3Schema];
    assert.deepEqual(schemaDifferences(u, o), []);
    // The walk reaches the fields the sidecar writes.
    const driver = (((o.properties as Schema).spec as Schema).properties as Schema).driver as Schema;
    assert.deepEqual([...(driver.required as string[])].sort(), ["endpoint", "name", "nodeID"]);
  });

  test("our schema uses only JSONSchemaProps fields and documents the sidecar's annotations", () => {
    const o = ours.spec.versions[0].schema.openAPIV3Schema;
    assert.deepEqual(unknownSchemaKeywords(o), []);
    for (const a of ["createdByPodUID", "lastUpdatedAt", "driverRestartedAt"]) {
      assert.match(o.description as string, new RegExp(`sidecar\\.csiaddons\\.openshift\\.io/${a}`));
    }
  });

  test("the schema comparison notices each kind of difference", () => {
    const base = upstream.spec.versions[0].schema.openAPIV3Schema;
    const mutate = (change: (s: Schema) => void): string[] => {
      const copy = structuredClone(base);
      change(copy);
      return schemaDifferences(base, copy);
    };
    const driverOf = (s: Schema) => ((((s.properties as Schema).spec as Schema).properties as Schema).driver as Schema);
    const nodeID = (s: Schema) => (driverOf(s).properties as Schema).nodeID as Schema;
    assert.deepEqual(mutate((s) => (nodeID(s).description = "reworded")), []);
    assert.deepEqual(mutate((s) => (nodeID(s).type = "integer")), ["/properties/spec/properties/driver/properties/nodeID/type: differs"]);
    assert.deepEqual(mutate((s) => (driverOf(s).required = ["name", "endpoint"])), ["/properties/spec/properties/driver/required: differs"]);
    assert.deepEqual(mutate((s) => (driverOf(s).required = ["nodeID", "name", "endpoint"])), []);
    assert.deepEqual(mutate((s) => delete nodeID(s)["x-kubernetes-validations"]), [
      "/properties/spec/properties/driver/properties/nodeID/x-kubernetes-validations: only in upstream",
    ]);
    assert.deepEqual(mutate((s) => ((nodeID(s)["x-kubernetes-validations"] as Schema[])[0].rule = "true")), [
      "/properties/spec/properties/driver/properties/nodeID/x-kubernetes-validations: differs",
    ]);
    assert.deepEqual(mutate((s) => ((driverOf(s).properties as Schema).extra = { type: "string" })), [
      "/properties/spec/properties/driver/properties/extra: only in ours",
    ]);
    assert.deepEqual(
      mutate((s) => (((s.properties as Schema).status as Schema).properties as Schema).capabilities = { type: "array", items: { type: "integer" } }),
      ["/properties/status/properties/capabilities/items/type: differs"],
    );
  });
});

describe("RBAC", () => {
  const rules = loadRbacRules(manifests);
  const all = [...rules.namespaced, ...rules.cluster];
  const roles = manifests.filter((m) => m.doc.kind === "Role" || m.doc.kind === "ClusterRole");

  test("grants exactly the sidecar's documented needs", () => {
    // Each line is a sidecar step (see the comments in deploy/rbac/); changing one is a decision.
    const table = (list: Rule[]) => list.map((r) => `${r.apiGroups.join(",") || "core"}/${r.resources.join(",")}: ${r.verbs.join(",")}`).sort();
    assert.deepEqual(table(rules.namespaced), [
      "apps/replicasets: get",
      "coordination.k8s.io/leases: get,create,update",
      "core/pods: get",
      "csiaddons.openshift.io/csiaddonsnodes: get,watch,create,update,delete",
    ]);
    assert.deepEqual(table(rules.cluster), [
      "authentication.k8s.io/tokenreviews: create",
      "authorization.k8s.io/subjectaccessreviews: create",
      "core/nodes: get,watch",
      "core/persistentvolumes: get",
      "core/secrets: get",
      "storage.k8s.io/volumeattachments: get",
    ]);
  });

  test("no wildcards, no escalation verbs, secrets get only", () => {
    for (const r of all) {
      for (const v of [...r.verbs, ...r.apiGroups, ...r.resources, ...(r.resourceNames ?? [])]) assert.ok(!v.includes("*"), `wildcard in ${JSON.stringify(r)}`);
      // "call" is the callers' permission (AUTH-POLICY): a sidecar holding it could call every sidecar.
      for (const v of ["escalate", "bind", "impersonate", "patch", "deletecollection", "call"]) assert.ok(!r.verbs.includes(v), `${v} in ${JSON.stringify(r)}`);
      if (r.resources.includes("secrets")) assert.deepEqual(r.verbs, ["get"]);
      assert.ok(r.resources.every((res) => !res.includes("/")), `subresource in ${JSON.stringify(r)}`);
    }
    assert.deepEqual(
      all.filter((r) => r.resources.includes("secrets")).map((r) => r.verbs),
      [["get"]],
    );
  });

  test("every role in deploy/ is bound to the sidecar's ServiceAccount, and nothing else is", () => {
    const ruleCount = roles.reduce((n, m) => n + ((m.doc as { rules?: unknown[] }).rules?.length ?? 0), 0);
    assert.equal(all.length, ruleCount, "a Role or ClusterRole is not bound to the sidecar");
    for (const { doc } of manifests.filter((m) => m.doc.kind.endsWith("Binding"))) {
      assert.deepEqual((doc as K8sObject & { subjects: unknown[] }).subjects, [
        { kind: "ServiceAccount", name: sidecarServiceAccount, namespace: kustomization.namespace },
      ]);
    }
  });

  test("loadRbacRules returns plain rules, namespaced and cluster-wide apart", () => {
    assert.ok(rules.namespaced.some((r) => r.resources.includes("csiaddonsnodes")));
    assert.ok(rules.cluster.some((r) => r.resources.includes("secrets")));
    assert.ok(!rules.cluster.some((r) => r.resources.includes("csiaddonsnodes")), "CSIAddonsNode access must stay namespaced");
    for (const r of all) assert.deepEqual(Object.keys(r).sort(), r.resourceNames ? ["apiGroups", "resourceNames", "resources", "verbs"] : ["apiGroups", "resources", "verbs"]);
  });
});

// DESIGN 4.1: every flag the sidecar takes.
const sidecarFlags = new Set([
  "csi-addons-address", "node-id", "pod", "namespace", "pod-uid", "controller-port", "controller-ip", "stagingpath",
  "timeout", "http-endpoint", "kubeconfig", "max-inflight", "log-level", "log-format", "enable-auth", "auth-audience",
  "tls-cert-file", "tls-key-file", "version",
]);

describe("example DaemonSet", () => {
  const ds = findOne(manifests, "DaemonSet") as DaemonSetDoc;
  const pod = ds.spec.template.spec;
  const container = (name: string) => {
    const c = pod.containers.find((x) => x.name === name);
    assert.ok(c, `no container ${name}`);
    return c;
  };
  const sidecar = container("csi-addons-healer");
  const driver = container("driver");
  const flags = new Map(
    (sidecar.args ?? []).map((arg) => {
      const m = /^--([a-z][a-z-]*)(?:=(.*))?$/.exec(arg);
      assert.ok(m, `sidecar argument ${arg} is not --flag or --flag=value`);
      return [m[1], m[2] ?? "true"] as const;
    }),
  );
  const mountOf = (c: Container, path: string) => {
    const m = c.volumeMounts?.find((v) => path === v.mountPath || path.startsWith(v.mountPath.replace(/\/?$/, "/")));
    assert.ok(m, `${path} is not under a volume mounted in container ${c.name}`);
    return m;
  };
  const volume = (name: string) => pod.volumes.find((v) => v.name === name)!;
  const portOf = (c: Container, ref: string | number) => (typeof ref === "number" ? ref : c.ports?.find((p) => p.name === ref)?.containerPort);

  test("the sidecar uses only flags the sidecar has, each once", () => {
    assert.equal(flags.size, sidecar.args!.length, "a flag is given twice");
    for (const f of flags.keys()) assert.ok(sidecarFlags.has(f), `unknown sidecar flag --${f}`);
  });

  test("the sidecar runs non-root, read-only, without capabilities, with limits", () => {
    const sc = sidecar.securityContext!;
    assert.equal(sc.runAsNonRoot, true);
    assert.ok(typeof sc.runAsUser === "number" && sc.runAsUser > 0);
    assert.equal(sc.readOnlyRootFilesystem, true);
    assert.equal(sc.allowPrivilegeEscalation, false);
    assert.notEqual(sc.privileged, true);
    assert.deepEqual(sc.capabilities, { drop: ["ALL"] });
    assert.equal(sc.seccompProfile?.type, "RuntimeDefault");
    assert.ok(sidecar.resources?.limits?.memory, "no memory limit");
    assert.ok(sidecar.resources?.requests?.memory && sidecar.resources.requests.cpu, "no requests");
    assert.notEqual(pod.hostNetwork, true);
    assert.notEqual(pod.hostPID, true);
  });

  test("the kubelet directory is read-only in the sidecar and --stagingpath lies under it", () => {
    const staging = flags.get("stagingpath") ?? "/var/lib/kubelet/plugins/kubernetes.io/csi/";
    const m = mountOf(sidecar, staging);
    assert.equal(m.readOnly, true);
    assert.notEqual(m.mountPropagation, "Bidirectional");
    assert.equal(volume(m.name).hostPath?.path, m.mountPath, "the sidecar must see the host's paths at the same place");
    for (const other of sidecar.volumeMounts!) {
      if (volume(other.name).hostPath) assert.equal(other.readOnly, true, `host path ${other.mountPath} is writable in the sidecar`);
    }
    // Kubernetes refuses Bidirectional propagation in an unprivileged container.
    for (const c of pod.containers) {
      if (c.volumeMounts?.some((v) => v.mountPropagation === "Bidirectional")) assert.equal(c.securityContext?.privileged, true, c.name);
    }
  });

  test("the sidecar dials the socket the driver serves, through a volume both mount", () => {
    const address = flags.get("csi-addons-address") ?? "unix:///run/csi-addons/socket";
    const args = driver.args ?? [];
    assert.equal(args[args.indexOf("--addons-endpoint") + 1], address);
    const socket = address.replace(/^unix:\/\//, "");
    const [s, d] = [mountOf(sidecar, socket), mountOf(driver, socket)];
    assert.equal(s.name, d.name);
    assert.equal(s.mountPath, d.mountPath);
    assert.ok(volume(s.name).emptyDir, "the socket volume should be a pod-local emptyDir");
    assert.notEqual(args[args.indexOf("--csi-endpoint") + 1], address, "the sidecar must never dial the CSI socket");
  });

  test("node, pod, namespace and pod UID come from the downward API", () => {
    const env = Object.fromEntries((sidecar.env ?? []).map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]));
    assert.equal(env.NODE_ID, "spec.nodeName");
    assert.equal(env.POD_NAME, "metadata.name");
    assert.equal(env.POD_NAMESPACE, "metadata.namespace");
    assert.equal(env.POD_UID, "metadata.uid");
  });

  test("ports, probes and auth match the flags", () => {
    const controllerPort = Number(flags.get("controller-port") ?? 9070);
    assert.ok(sidecar.ports?.some((p) => p.containerPort === controllerPort && p.name === "controller"));
    const httpPort = Number(/:(\d+)$/.exec(flags.get("http-endpoint") ?? "")?.[1]);
    assert.ok(httpPort > 0, "--http-endpoint must be set for the probes");
    for (const [probe, path] of [[sidecar.livenessProbe, "/healthz"], [sidecar.readinessProbe, "/readyz"]] as const) {
      assert.equal(probe?.httpGet?.path, path);
      assert.equal(portOf(sidecar, probe!.httpGet!.port), httpPort);
    }
    assert.notEqual(flags.get("enable-auth"), "false");
    assert.equal(flags.get("auth-audience"), "csi-addons-healer,@api-server");
    assert.ok(!flags.has("auth-verb") || flags.get("auth-verb") === "call", "callers are authorized for call, which sidecars do not hold");
  });

  test("TLS files come from an optional Secret readable by the sidecar only", () => {
    for (const f of ["tls-cert-file", "tls-key-file"]) {
      const m = mountOf(sidecar, flags.get(f)!);
      assert.equal(m.readOnly, true);
      assert.equal(volume(m.name).secret?.optional, true);
      assert.equal(volume(m.name).secret?.defaultMode, 0o440);
      assert.ok(!driver.volumeMounts?.some((v) => v.name === m.name), "the driver must not see the TLS key");
    }
    assert.equal(pod.securityContext?.fsGroup, sidecar.securityContext?.runAsGroup, "fsGroup gives the sidecar the key and the socket");
  });

  test("runs as the ServiceAccount the RBAC binds, with its token in the sidecar only", () => {
    assert.equal(pod.serviceAccountName, sidecarServiceAccount);
    assert.equal(pod.automountServiceAccountToken, false);
    const m = mountOf(sidecar, "/var/run/secrets/kubernetes.io/serviceaccount/token");
    assert.equal(m.readOnly, true);
    const sources = volume(m.name).projected?.sources ?? [];
    assert.ok(sources.some((s) => s.serviceAccountToken?.path === "token"));
    assert.ok(sources.some((s) => s.configMap?.name === "kube-root-ca.crt"));
    assert.ok(sources.some((s) => s.downwardAPI));
    assert.ok(!driver.volumeMounts?.some((v) => v.name === m.name), "the driver must not get the sidecar's token");
  });

  test("deploy/README.md uses the names the manifests use", () => {
    const readme = readFileSync(join(deployDir, "README.md"), "utf8");
    const driverArgs = driver.args ?? [];
    const tlsSecret = pod.volumes.find((v) => v.secret?.optional)?.secret?.secretName;
    for (const name of [
      ds.metadata.name,
      kustomization.namespace,
      sidecarServiceAccount,
      tlsSecret!,
      flags.get("auth-audience")!,
      driverArgs[driverArgs.indexOf("--name") + 1],
      flags.get("csi-addons-address")!,
      `app.kubernetes.io/name=${ds.spec.template.metadata.labels["app.kubernetes.io/name"]}`,
      ...kustomization.resources,
    ]) {
      assert.ok(readme.includes(name), `README does not mention ${name}`);
    }
  });

  test("both containers use the image the kustomization names once", () => {
    const [image] = kustomization.images ?? [];
    assert.ok(image?.newName && image.newTag, "kustomization.yaml sets no image");
    for (const c of pod.containers) assert.equal(c.image, image.name, c.name);
  });
});

describe("kubectl kustomize", () => {
  const kubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
  const render = (dir: string): K8sObject[] => {
    const r = spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return parseYamlDocuments(r.stdout, `kubectl kustomize ${dir}`) as K8sObject[];
  };
  const check = (objects: K8sObject[], namespace: string) => {
    const rendered: Manifest[] = objects.map((doc) => ({ file: "(rendered)", doc }));
    findOne(rendered, "Namespace", namespace);
    for (const o of objects) {
      if (!clusterScoped.has(o.kind)) assert.equal(o.metadata.namespace, namespace, `${o.kind} ${o.metadata.name}`);
      assert.equal(o.metadata.labels?.["app.kubernetes.io/part-of"], "csi-addons-healer", `${o.kind} ${o.metadata.name}`);
      assert.deepEqual(validateStrict(o, o.kind === "CustomResourceDefinition" ? [crdSchemaTree] : []), []);
    }
    const [image] = kustomization.images!;
    const ds = findOne(rendered, "DaemonSet") as DaemonSetDoc;
    for (const c of ds.spec.template.spec.containers) assert.equal(c.image, `${image.newName}:${image.newTag}`);
    const rules = loadRbacRules(rendered);
    assert.equal(rules.namespaced.length + rules.cluster.length, loadRbacRules(manifests).cluster.length + loadRbacRules(manifests).namespaced.length);
  };

  test("renders deploy/ with the namespace, labels and image applied", { skip: kubectl.error ? "kubectl is not installed" : false }, () => {
    check(render(deployDir), kustomization.namespace);
  });

  test("an overlay's namespace moves everything, RBAC subjects included", { skip: kubectl.error ? "kubectl is not installed" : false }, () => {
    const dir = mkdtempSync(join(tmpdir(), "deploy-overlay-"));
    try {
      writeFileSync(join(dir, "kustomization.yaml"), `namespace: storage-healer\nresources:\n  - ${relative(dir, deployDir)}\n`);
      check(render(dir), "storage-healer");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

type Schema = Record<string, unknown>;

interface CrdDoc extends K8sObject {
  spec: {
    group: string;
    names: unknown;
    scope: string;
    conversion?: unknown;
    versions: { name: string; subresources?: unknown; schema: { openAPIV3Schema: Schema } }[];
  };
}

interface Container {
  name: string;
  image?: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  ports?: { name?: string; containerPort: number }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean; mountPropagation?: string }[];
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    runAsGroup?: number;
    readOnlyRootFilesystem?: boolean;
    allowPrivilegeEscalation?: boolean;
    privileged?: boolean;
    capabilities?: { add?: string[]; drop?: string[] };
    seccompProfile?: { type: string };
  };
}

interface DaemonSetDoc extends K8sObject {
  spec: {
    template: {
      metadata: { labels: Record<string, string> };
      spec: {
        serviceAccountName?: string;
        automountServiceAccountToken?: boolean;
        hostNetwork?: boolean;
        hostPID?: boolean;
        securityContext?: { fsGroup?: number };
        containers: Container[];
        volumes: {
          name: string;
          emptyDir?: object;
          hostPath?: { path: string };
          secret?: { secretName: string; optional?: boolean; defaultMode?: number };
          projected?: { sources: { serviceAccountToken?: { path: string }; configMap?: { name: string }; downwardAPI?: object }[] };
        }[];
      };
    };
  };
}

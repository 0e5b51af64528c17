// deploy/ as kustomize renders it: the reusable base (the sidecar's RBAC, nothing else), each
// component with it, the top-level example install, an overlay into another namespace and the
// Ceph-CSI example install. Every rendered object is valid Kubernetes; the RBAC is the least the
// sidecar needs and never the callers' permission; our CRD accepts what the upstream one accepts.
// The example DaemonSet's own checks are in daemonset.test.ts, the README walk-through's in
// walkthrough.test.ts.
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import {
  deployDir,
  findOne,
  listYamlFiles,
  noKubectl,
  parseYamlDocuments,
  readKustomization,
  render,
  renderOverlay,
  type K8sObject,
} from "../../support/deploy/load.js";
import { loadRbacRules, sidecarServiceAccount, type Rule } from "../../support/deploy/rbac.js";
import { podSecurityRestrictedViolations, type DaemonSetDoc } from "../../support/deploy/pod.js";
import { crdSchemaTree, schemaDifferences, unknownSchemaKeywords, validateStrict } from "../../support/deploy/validate.js";

const skip = noKubectl;
const clusterScoped = new Set(["Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"]);
const rbacKinds = ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"];
const kinds = (objects: K8sObject[]) => [...new Set(objects.map((o) => o.kind))].sort();
const names = (objects: K8sObject[], kind: string) =>
  objects
    .filter((o) => o.kind === kind)
    .map((o) => o.metadata.name)
    .sort();
type Binding = K8sObject & { roleRef: { kind: string; name: string }; subjects: { kind: string; name: string; namespace?: string }[] };
const bindings = (objects: K8sObject[]) => objects.filter((o) => o.kind.endsWith("Binding")) as Binding[];
/** Components other helpers own: referenced from the top level when they exist. */
const componentDirs = readdirSync(join(deployDir, "components"))
  .filter((d) => existsSync(join(deployDir, "components", d, "kustomization.yaml")))
  .sort();

const top = skip ? [] : render("");
const base = skip ? [] : render("base");
const ceph = skip ? [] : render("examples/ceph-csi-rbd");
const controllerPlugin = skip ? [] : render("examples/controller-plugin");

describe("deploy/ layout", { skip }, () => {
  test("every YAML file is used: by a kustomization, or a patch deploy/README.md applies", () => {
    const readme = readFileSync(join(deployDir, "README.md"), "utf8");
    const used = new Set<string>();
    for (const file of listYamlFiles().filter((f) => f.endsWith("kustomization.yaml"))) {
      const dir = file.replace(/\/?kustomization\.yaml$/, "");
      const k = readKustomization(dir);
      for (const p of [...(k.resources ?? []), ...(k.components ?? []), ...(k.patches ?? []).flatMap((x) => (x.path ? [x.path] : []))]) {
        used.add(join(dir, p));
      }
    }
    for (const file of listYamlFiles().filter((f) => !f.endsWith("kustomization.yaml"))) {
      const listed = used.has(file) || [...used].some((u) => file.startsWith(`${u}/`));
      assert.ok(listed || readme.includes(`deploy/${file}`), `${file} is used by no kustomization and not in deploy/README.md`);
    }
    // Opt-in components (least authority: an install holds only the grants it uses): the upstream
    // controller's access, the Lease of controller plugins, and evicting pods left with a dead mount.
    const optIn = ["controller-plugin-lease", "pod-restarts", "upstream-controller-access"];
    assert.deepEqual(
      readKustomization().components,
      componentDirs.filter((d) => !optIn.includes(d)).map((d) => `components/${d}`),
      "the top level installs every component but the opt-in ones",
    );
  });

  test("every rendered object validates against its Kubernetes schema, with no unknown fields", () => {
    const renderings: [string, K8sObject[]][] = [
      ["deploy/", top],
      ["deploy/base", base],
      ["deploy/examples/ceph-csi-rbd", ceph],
      ["deploy/examples/controller-plugin", controllerPlugin],
      ["overlay of deploy/ into storage-healer", renderOverlay({ namespace: "storage-healer", resources: [""] })],
      ...componentDirs.map((d) => [`base + components/${d}`, renderOverlay({ resources: ["base"], components: [`components/${d}`] })] as [string, K8sObject[]]),
    ];
    for (const [where, objects] of renderings) {
      assert.ok(objects.length >= 4, `${where}: only ${objects.length} objects`);
      for (const doc of objects) {
        const what = `${where}: ${doc.kind} ${doc.metadata?.name}`;
        const opaque = doc.kind === "CustomResourceDefinition" ? [crdSchemaTree] : [];
        assert.doesNotThrow(() => validateStrict(doc, opaque), what);
        assert.deepEqual(validateStrict(doc, opaque), [], `${what}: unknown fields`);
        // Our own parts are labelled on their own; other components get it from the top level.
        if (!where.startsWith("base + components/") || /\/(crd|example-driver)$/.test(where)) {
          assert.equal(doc.metadata.labels?.["app.kubernetes.io/part-of"], "csi-addons-healer", what);
        }
      }
    }
  });

  test("the strict checks catch what they are for", () => {
    const ds = findOne(top, "DaemonSet") as DaemonSetDoc;
    Object.assign(ds.spec.template.spec.volumes[0]!, { hostPth: { path: "/x" } });
    assert.deepEqual(validateStrict(ds), ["/spec/template/spec/volumes/0/hostPth"]);
    Object.assign(ds.spec.template.spec.containers[0]!, { ports: [{ containerPort: "9070" }] });
    assert.throws(() => validateStrict(ds), /containerPort/);
    assert.throws(() => parseYamlDocuments("defaultMode: 0440\n", "octal.yaml"), /YAML 1.1 and 1.2/);
    assert.throws(() => parseYamlDocuments("a: 1\na: 2\n", "dup.yaml"), /dup.yaml/);
  });

  test("base: the sidecar's Role and ClusterRole with their bindings, and nothing else", () => {
    assert.deepEqual(kinds(base), rbacKinds);
    assert.equal(base.length, 4);
    // With the CRD component too: still no Namespace, ServiceAccount or workload.
    assert.deepEqual(kinds(renderOverlay({ resources: ["base"], components: ["components/crd"] })), ["CustomResourceDefinition", ...rbacKinds].sort());
  });

  test("no Namespace anywhere but the top-level example; each component adds only its own kinds", () => {
    for (const d of componentDirs) {
      const objects = renderOverlay({ resources: ["base"], components: [`components/${d}`] });
      assert.ok(!objects.some((o) => o.kind === "Namespace"), `components/${d} creates a Namespace`);
    }
    assert.ok(!ceph.some((o) => o.kind === "Namespace"), "the Ceph-CSI example creates a Namespace");
    assert.deepEqual(
      kinds(renderOverlay({ resources: ["base"], components: ["components/example-driver"] })),
      ["DaemonSet", ...rbacKinds, "ServiceAccount"].sort(),
    );
    assert.deepEqual(names(top, "Namespace"), [readKustomization().namespace]);
  });

  test("the top-level install: namespaced objects in its namespace, images named once", () => {
    const ns = readKustomization().namespace!;
    for (const o of top) {
      if (clusterScoped.has(o.kind)) assert.equal(o.metadata.namespace, undefined, `${o.kind} ${o.metadata.name}`);
      else assert.equal(o.metadata.namespace, ns, `${o.kind} ${o.metadata.name}`);
    }
    const images = new Map(readKustomization().images!.map((i) => [i.name, `${i.newName}:${i.newTag}`]));
    const ds = findOne(top, "DaemonSet") as DaemonSetDoc;
    for (const c of ds.spec.template.spec.containers) assert.ok([...images.values()].includes(c.image!), `${c.name}: ${c.image}`);
  });

  test("the example install has a namespace of its own: never the upstream controller's, which it only names as a subject", () => {
    const upstreamNamespace = "csi-addons-system";
    assert.notEqual(readKustomization().namespace, upstreamNamespace);
    assert.ok(
      !top.some((o) => o.metadata.name === upstreamNamespace || o.metadata.namespace === upstreamNamespace),
      "`kubectl delete -k deploy/` would delete the upstream controller's objects",
    );
    // The upstream controller's access is opt-in (least authority): not in the default install, only
    // with its component.
    assert.deepEqual(
      bindings(top).filter((b) => b.subjects.some((s) => s.namespace === upstreamNamespace)),
      [],
    );
    const withAccess = renderOverlay({ resources: [""], components: ["components/upstream-controller-access"] });
    const upstream = bindings(withAccess).filter((b) => b.subjects.some((s) => s.namespace === upstreamNamespace));
    assert.deepEqual(
      upstream.map((b) => `${b.kind}/${b.metadata.name}`),
      ["ClusterRoleBinding/csi-addons-healer-upstream-caller"],
    );
    assert.deepEqual(upstream[0]!.subjects, [{ kind: "ServiceAccount", name: "csi-addons-controller-manager", namespace: upstreamNamespace }]);
  });

  test("every pod of the example install meets the Pod Security level its namespace enforces (restricted)", () => {
    assert.equal(findOne(top, "Namespace").metadata.labels?.["pod-security.kubernetes.io/enforce"], "restricted");
    const workloads = top.filter((o) => o.kind === "DaemonSet" || o.kind === "Deployment") as DaemonSetDoc[];
    assert.deepEqual(workloads.map((w) => w.kind).sort(), ["DaemonSet", "Deployment"]);
    for (const w of workloads) assert.deepEqual(podSecurityRestrictedViolations(w.spec.template.spec), [], `${w.kind} ${w.metadata.name}`);
  });

  test("an overlay into another namespace moves every namespaced object and the sidecar's RBAC subjects", () => {
    const moved = renderOverlay({ namespace: "storage-healer", resources: [""] });
    for (const o of moved) if (!clusterScoped.has(o.kind)) assert.equal(o.metadata.namespace, "storage-healer", `${o.kind} ${o.metadata.name}`);
    const rules = loadRbacRules(moved.map((doc) => ({ file: "overlay", doc })));
    const expected = loadRbacRules(top.map((doc) => ({ file: "deploy/", doc })));
    assert.deepEqual(rules, expected, "the sidecar's ServiceAccount keeps all its permissions after the move");
    for (const b of bindings(moved).filter((b) => b.roleRef.name === "csi-addons-healer")) {
      assert.deepEqual(b.subjects, [{ kind: "ServiceAccount", name: sidecarServiceAccount, namespace: "storage-healer" }]);
    }
  });

  test("the Ceph-CSI example binds the driver's ServiceAccount in the driver's namespace, under per-install names", () => {
    assert.deepEqual(kinds(ceph), rbacKinds);
    for (const o of ceph) {
      assert.equal(o.metadata.name, "csi-addons-healer-ceph-csi-rbd", o.kind);
      if (!clusterScoped.has(o.kind)) assert.equal(o.metadata.namespace, "ceph-csi");
    }
    for (const b of bindings(ceph)) {
      assert.equal(b.roleRef.name, "csi-addons-healer-ceph-csi-rbd");
      assert.deepEqual(b.subjects, [{ kind: "ServiceAccount", name: "rbd-csi-nodeplugin", namespace: "ceph-csi" }]);
    }
    // The same permissions as the example install, bound to another ServiceAccount.
    const strip = (objects: K8sObject[]) => objects.filter((o) => o.kind.endsWith("Role")).map((o) => (o as { rules?: unknown }).rules);
    assert.deepEqual(strip(ceph), strip(base));
  });

  test("the controller-plugin example: two replicas with the sidecar, its own ServiceAccount bound, Lease rights, no Namespace", () => {
    const deployment = findOne(controllerPlugin, "Deployment") as K8sObject & {
      spec: { replicas: number; template: { spec: { serviceAccountName: string; containers: { name: string; args?: string[] }[] } } };
    };
    assert.equal(deployment.spec.replicas, 2, "a standby sidecar to take the Lease over");
    const pod = deployment.spec.template.spec;
    const sidecar = pod.containers.find((c) => c.name === "csi-addons-healer");
    assert.ok(sidecar, "the sidecar container");
    assert.ok(sidecar.args?.includes("--require-tls-files"));
    assert.equal(names(controllerPlugin, "Namespace").length, 0);
    for (const b of bindings(controllerPlugin)) {
      assert.deepEqual(b.subjects, [
        { kind: "ServiceAccount", name: pod.serviceAccountName, namespace: readKustomization("examples/controller-plugin").namespace },
      ]);
    }
    const roles = controllerPlugin.filter((o) => o.kind === "Role") as (K8sObject & { rules: Rule[] })[];
    const lease = roles.flatMap((r) => r.rules).find((r) => r.resources.includes("leases"));
    assert.deepEqual(lease?.verbs, ["get", "create", "update"], "the Lease <driver>-csi-addons: read, create, renew");
  });

  test("the healer controller: two replicas kept apart, and a PodDisruptionBudget that lets one of them go at a time", () => {
    type Selected = K8sObject & { spec: { selector: { matchLabels: Record<string, string> } } };
    const deployment = top.find((o) => o.kind === "Deployment" && o.metadata.name === "csi-addons-healer-controller") as Selected & {
      spec: { replicas: number; template: { metadata: { labels: Record<string, string> } } };
    };
    const budget = findOne(top, "PodDisruptionBudget") as Selected & { spec: { maxUnavailable?: number; minAvailable?: number } };
    assert.equal(deployment.spec.replicas, 2);
    assert.deepEqual(budget.spec.selector, deployment.spec.selector, "the budget selects the Deployment's pods");
    assert.equal(budget.metadata.namespace, deployment.metadata.namespace);
    // A drain evicts one replica; the other keeps or takes the Lease. minAvailable would block a
    // drain for good once someone scales the controller to one replica.
    assert.equal(budget.spec.maxUnavailable, 1);
    assert.equal(budget.spec.minAvailable, undefined);
    const matches = (labels: Record<string, string> = {}) => Object.entries(budget.spec.selector.matchLabels).every(([k, v]) => labels[k] === v);
    const ds = findOne(top, "DaemonSet") as DaemonSetDoc & { spec: { template: { metadata: { labels: Record<string, string> } } } };
    assert.ok(matches(deployment.spec.template.metadata.labels));
    assert.ok(!matches(ds.spec.template.metadata.labels), "the node plugins are not in the controller's budget");
  });

  test("two installs (two drivers, or two namespaces) never share a cluster-scoped object", () => {
    const cephfs = renderOverlay(
      {
        namespace: "ceph-csi",
        nameSuffix: "-ceph-csi-cephfs",
        resources: ["base"],
        patches: [{ path: "subject.yaml", target: { kind: "(Cluster)?RoleBinding", name: "csi-addons-healer" } }],
      },
      { "subject.yaml": "- op: replace\n  path: /subjects/0\n  value: {kind: ServiceAccount, name: cephfs-csi-nodeplugin, namespace: ceph-csi}\n" },
    );
    const clusterNames = (objects: K8sObject[]) => objects.filter((o) => clusterScoped.has(o.kind)).map((o) => `${o.kind}/${o.metadata.name}`);
    for (const [a, b] of [
      [ceph, cephfs],
      [ceph, top],
      [cephfs, top],
    ] as const) {
      const shared = clusterNames(a).filter((n) => clusterNames(b).includes(n) && !n.startsWith("CustomResourceDefinition/"));
      assert.deepEqual(shared, []);
    }
  });
});

describe("CSIAddonsNode CRD", { skip }, () => {
  const upstreamFile = new URL("../../support/fixtures/upstream-csiaddonsnodes-crd.yaml", import.meta.url).pathname;
  const [upstream] = parseYamlDocuments(readFileSync(upstreamFile, "utf8"), "upstream CRD") as [CrdDoc];
  const ours = (skip ? {} : findOne(top, "CustomResourceDefinition")) as CrdDoc;

  test("same name, group, names, scope, versions, printer columns and subresources as upstream", () => {
    assert.equal(ours.metadata.name, upstream.metadata.name);
    assert.equal(ours.spec.group, upstream.spec.group);
    assert.deepEqual(ours.spec.names, upstream.spec.names);
    assert.equal(ours.spec.scope, upstream.spec.scope);
    assert.equal(ours.spec.conversion, upstream.spec.conversion);
    assert.deepEqual(
      ours.spec.versions.map(({ schema: _schema, ...rest }) => rest),
      upstream.spec.versions.map(({ schema: _schema, ...rest }) => rest),
    );
    assert.deepEqual(
      ours.spec.versions.map((v) => v.name),
      ["v1alpha1"],
    );
    assert.deepEqual(ours.spec.versions[0]!.subresources, { status: {} });
  });

  test("our schema accepts exactly what the upstream schema accepts (descriptions aside)", () => {
    const [u, o] = [upstream.spec.versions[0]!.schema.openAPIV3Schema, ours.spec.versions[0]!.schema.openAPIV3Schema];
    assert.deepEqual(schemaDifferences(u, o), []);
    // The walk reaches the fields the sidecar writes.
    const driver = (((o.properties as Schema).spec as Schema).properties as Schema).driver as Schema;
    assert.deepEqual([...(driver.required as string[])].sort(), ["endpoint", "name", "nodeID"]);
  });

  test("our schema uses only JSONSchemaProps fields and documents the sidecar's annotations", () => {
    const o = ours.spec.versions[0]!.schema.openAPIV3Schema;
    assert.deepEqual(unknownSchemaKeywords(o), []);
    for (const a of ["createdByPodUID", "lastUpdatedAt", "driverRestartedAt"]) {
      assert.match(o.description as string, new RegExp(`sidecar\\.csiaddons\\.openshift\\.io/${a}`));
    }
  });

  test("the schema comparison notices each kind of difference", () => {
    const base = upstream.spec.versions[0]!.schema.openAPIV3Schema;
    const mutate = (change: (s: Schema) => void): string[] => {
      const copy = structuredClone(base);
      change(copy);
      return schemaDifferences(base, copy);
    };
    const driverOf = (s: Schema) => (((s.properties as Schema).spec as Schema).properties as Schema).driver as Schema;
    const nodeID = (s: Schema) => (driverOf(s).properties as Schema).nodeID as Schema;
    assert.deepEqual(
      mutate((s) => (nodeID(s).description = "reworded")),
      [],
    );
    assert.deepEqual(
      mutate((s) => (nodeID(s).type = "integer")),
      ["/properties/spec/properties/driver/properties/nodeID/type: differs"],
    );
    assert.deepEqual(
      mutate((s) => (driverOf(s).required = ["name", "endpoint"])),
      ["/properties/spec/properties/driver/required: differs"],
    );
    assert.deepEqual(
      mutate((s) => (driverOf(s).required = ["nodeID", "name", "endpoint"])),
      [],
    );
    assert.deepEqual(
      mutate((s) => delete nodeID(s)["x-kubernetes-validations"]),
      ["/properties/spec/properties/driver/properties/nodeID/x-kubernetes-validations: only in upstream"],
    );
    assert.deepEqual(
      mutate((s) => ((nodeID(s)["x-kubernetes-validations"] as Schema[])[0]!.rule = "true")),
      ["/properties/spec/properties/driver/properties/nodeID/x-kubernetes-validations: differs"],
    );
    assert.deepEqual(
      mutate((s) => ((driverOf(s).properties as Schema).extra = { type: "string" })),
      ["/properties/spec/properties/driver/properties/extra: only in ours"],
    );
    assert.deepEqual(
      mutate((s) => ((((s.properties as Schema).status as Schema).properties as Schema).capabilities = { type: "array", items: { type: "integer" } })),
      ["/properties/status/properties/capabilities/items/type: differs"],
    );
  });
});

describe("RBAC", { skip }, () => {
  const rules = skip ? { namespaced: [], cluster: [] } : loadRbacRules(top.map((doc) => ({ file: "deploy/", doc })));
  const all = [...rules.namespaced, ...rules.cluster];

  test("grants exactly the sidecar's documented needs", () => {
    // Each line is a sidecar step (see the comments in deploy/base/); changing one is a decision.
    const table = (list: Rule[]) => list.map((r) => `${r.apiGroups.join(",") || "core"}/${r.resources.join(",")}: ${r.verbs.join(",")}`).sort();
    assert.deepEqual(table(rules.namespaced), [
      "apps/replicasets: get",
      "core/pods: get",
      "csiaddons.openshift.io/csiaddonsnodes: get,watch,create,update,delete",
    ]);
    assert.deepEqual(table(rules.cluster), [
      "authentication.k8s.io/tokenreviews: create",
      "authorization.k8s.io/subjectaccessreviews: create",
      "core/nodes: get,watch",
      "core/persistentvolumes: get,watch",
      "core/pods: list,watch",
      "core/secrets: get",
      "storage.k8s.io/csidrivers: get",
      "storage.k8s.io/volumeattachments: get",
    ]);
  });

  test("no wildcards, no escalation verbs, secrets get only", () => {
    for (const r of all) {
      for (const v of [...r.verbs, ...r.apiGroups, ...r.resources, ...(r.resourceNames ?? [])]) assert.ok(!v.includes("*"), `wildcard in ${JSON.stringify(r)}`);
      // "call" is the callers' permission (DESIGN 4.6): a sidecar holding it could call every sidecar.
      for (const v of ["escalate", "bind", "impersonate", "patch", "deletecollection", "call"]) assert.ok(!r.verbs.includes(v), `${v} in ${JSON.stringify(r)}`);
      if (r.resources.includes("secrets")) assert.deepEqual(r.verbs, ["get"]);
      assert.ok(
        r.resources.every((res) => !res.includes("/")),
        `subresource in ${JSON.stringify(r)}`,
      );
    }
    assert.deepEqual(
      all.filter((r) => r.resources.includes("secrets")).map((r) => r.verbs),
      [["get"]],
    );
  });

  test("the sidecar never holds the callers' permission (call), in any rendering", () => {
    // DESIGN 4.6: a node can mint tokens for its pods' ServiceAccounts, so "call" must stay with the callers.
    assert.ok(!all.some((r) => r.verbs.includes("call") || r.verbs.includes("*")), "the sidecar's ServiceAccount may call sidecars");
    for (const objects of [base, ceph, controllerPlugin]) {
      for (const role of objects.filter((o) => o.kind.endsWith("Role")) as (K8sObject & { rules: Rule[] })[]) {
        assert.ok(!role.rules.some((r) => r.verbs.includes("call")), `${role.kind} ${role.metadata.name} holds call`);
      }
    }
  });

  test("every role of base/ is bound to the sidecar's ServiceAccount only", () => {
    const ruleCount = base.filter((o) => o.kind.endsWith("Role")).reduce((n, o) => n + ((o as { rules?: unknown[] }).rules?.length ?? 0), 0);
    const namespace = readKustomization("base").namespace!;
    const baseRules = loadRbacRules(
      [...base, { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: sidecarServiceAccount, namespace } }].map((doc) => ({ file: "base", doc })),
    );
    assert.equal(baseRules.namespaced.length + baseRules.cluster.length, ruleCount, "a Role or ClusterRole of base/ is not bound to the sidecar");
    for (const b of bindings(base)) {
      assert.deepEqual(b.subjects, [{ kind: "ServiceAccount", name: sidecarServiceAccount, namespace }]);
    }
  });

  test("loadRbacRules returns plain rules, namespaced and cluster-wide apart", () => {
    assert.ok(rules.namespaced.some((r) => r.resources.includes("csiaddonsnodes")));
    assert.ok(rules.cluster.some((r) => r.resources.includes("secrets")));
    assert.ok(!rules.cluster.some((r) => r.resources.includes("csiaddonsnodes")), "CSIAddonsNode access must stay namespaced");
    for (const r of all)
      assert.deepEqual(Object.keys(r).sort(), r.resourceNames ? ["apiGroups", "resourceNames", "resources", "verbs"] : ["apiGroups", "resources", "verbs"]);
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

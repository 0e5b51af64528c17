// deploy/README.md section 4, "Adding the sidecar to your driver", followed as a new user would:
// the commands are taken from the README (the test fails if one is not there verbatim) and run
// from the repository's root with kubectl, against the in-memory API server started as
// `npm run kube-api` would start it, seeded with Ceph-CSI's own RBD node plugin
// (../shared/reference/ceph-csi, in the namespace ceph-csi). What the in-memory server cannot take is said where
// it happens: it serves no rbac.authorization.k8s.io, so step 2's `kubectl apply -k` is checked by
// rendering the same kustomization (its objects are validated in manifests.test.ts).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startTs, tempDir, type Proc } from "../../support/proc.js";
import { CEPH_EXAMPLES, driverAddonsEndpoint, noCephCsi, readCephManifest, socketInVolume, upstreamWorkload } from "../../support/deploy/ceph-csi.js";
import { deployDir, findOne, noKubectl, parseYamlDocuments, renderOverlay, repoRoot, type K8sObject } from "../../support/deploy/load.js";
import {
  SIDECAR_FLAGS,
  assertHardened,
  assertSidecarInPod,
  containerOf,
  flagsOf,
  volumeOf,
  type Container,
  type DaemonSetDoc,
} from "../../support/deploy/pod.js";
import { validateStrict } from "../../support/deploy/validate.js";

const rbd = CEPH_EXAMPLES.find((e) => e.dir === "examples/ceph-csi-rbd")!;
const readme = readFileSync(join(deployDir, "README.md"), "utf8");
const section = readme.slice(readme.indexOf("## 4. Adding the sidecar to your driver"), readme.indexOf("## 5."));

/** Runs a command line of the README's section 4 (asserting it is there), with kubectl on `kubeconfig`. */
function step(line: string, kubeconfig?: string): string {
  assert.ok(section.includes(line), `deploy/README.md section 4 does not say: ${line}`);
  const [cmd, ...args] = line.split(/\s+/);
  const r = spawnSync(cmd!, args, {
    cwd: repoRoot,
    encoding: "utf8",
    env: { ...process.env, ...(kubeconfig ? { KUBECONFIG: kubeconfig } : {}) },
    timeout: 60_000,
  });
  assert.equal(r.status, 0, `${line}\n${r.stderr}`);
  return r.stdout;
}

const RBAC = "kubectl kustomize deploy/examples/ceph-csi-rbd/";
const PATCH = "kubectl -n ceph-csi patch daemonset csi-rbdplugin --patch-file deploy/examples/ceph-csi-rbd/sidecar-patch.yaml";
const TOKEN = "kubectl -n ceph-csi patch daemonset csi-rbdplugin --patch-file deploy/examples/ceph-csi-rbd/token-patch.yaml";
const GET = ["-n", "ceph-csi", "get", "daemonset", "csi-rbdplugin", "-o", "json"];

describe("deploy/README.md: adding the sidecar to Ceph-CSI's RBD node plugin", { skip: noKubectl || noCephCsi }, () => {
  let api: Proc;
  let kubeconfig = "";
  const live = (): DaemonSetDoc => {
    const r = spawnSync("kubectl", GET, { encoding: "utf8", env: { ...process.env, KUBECONFIG: kubeconfig } });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as DaemonSetDoc;
  };
  const original = noCephCsi ? ({} as DaemonSetDoc) : upstreamWorkload(rbd);
  /** The later steps start from step 4's patch, whether or not its test ran (a test run by name). */
  const afterStep4 = () => {
    if (!live().spec.template.spec.containers.some((c) => c.name === "csi-addons-healer")) step(PATCH, kubeconfig);
  };

  before(async () => {
    // Ceph-CSI's DaemonSet as its manifest ships it, moved into ceph-csi (it says "default").
    const seed = join(tempDir("walkthrough-"), "csi-rbdplugin.json");
    const ds = findOne(
      renderOverlay({ namespace: "ceph-csi", resources: ["./upstream.yaml"] }, { "upstream.yaml": readCephManifest(rbd.manifest) }),
      "DaemonSet",
    );
    writeFileSync(
      seed,
      JSON.stringify({ apiVersion: "v1", kind: "List", items: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "ceph-csi" } }, ds] }),
    );
    api = startTs("test/kube/cli.ts", ["--port", "0", "--seed", seed]);
    await api.waitForOutput(/kubeconfig: \S+\n/, 30_000);
    kubeconfig = /kubeconfig: (\S+)/.exec(api.stdout())![1]!;
  });
  after(async () => {
    await api?.stop();
  });

  test("step 2: the RBAC binds base's roles to the driver's ServiceAccount, and creates nothing else", () => {
    const objects = parseYamlDocuments(step(RBAC), RBAC) as K8sObject[];
    assert.ok(section.includes("kubectl apply -k deploy/examples/ceph-csi-rbd/"));
    assert.deepEqual(objects.map((o) => o.kind).sort(), ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]);
    for (const b of objects.filter((o) => o.kind.endsWith("Binding")) as (K8sObject & { subjects: unknown })[]) {
      assert.deepEqual(b.subjects, [{ kind: "ServiceAccount", name: original.spec.template.spec.serviceAccountName, namespace: "ceph-csi" }]);
    }
  });

  test("step 4: the patch adds the sidecar to the running DaemonSet, leaving the driver's containers working", () => {
    step(PATCH, kubeconfig);
    const ds = live();
    assert.deepEqual(validateStrict(ds as K8sObject), [], "the patched DaemonSet has unknown fields");
    const pod = ds.spec.template.spec;
    const before = original.spec.template.spec;
    // kubectl patch (the API server's strategic merge) keeps the DaemonSet's order and adds the sidecar last.
    assert.deepEqual(
      pod.containers.map((c) => c.name),
      [...before.containers.map((c) => c.name), "csi-addons-healer"],
    );
    assert.deepEqual(containerOf(pod, "driver-registrar"), containerOf(before, "driver-registrar"));
    assert.deepEqual(containerOf(pod, "liveness-prometheus"), containerOf(before, "liveness-prometheus"));
    assert.deepEqual(containerOf(pod, "csi-rbdplugin").args, containerOf(before, "csi-rbdplugin").args);
    assert.equal(pod.serviceAccountName, before.serviceAccountName, "the pod keeps the driver's ServiceAccount");

    const sidecar = containerOf(pod, "csi-addons-healer");
    const flags = assertSidecarInPod(pod, "csi-addons-healer");
    for (const f of flags.keys()) assert.ok(SIDECAR_FLAGS.has(f), `unknown sidecar flag --${f}`);
    assertHardened(sidecar, { root: true });

    // The socket the driver serves (its --csi-addons-endpoint=$(CSI_ADDONS_ENDPOINT)) is the one the sidecar dials.
    const served = socketInVolume(pod, "csi-rbdplugin", driverAddonsEndpoint(containerOf(pod, "csi-rbdplugin")));
    assert.deepEqual(socketInVolume(pod, "csi-addons-healer", flags.get("csi-addons-address")!), served);
    assert.ok(volumeOf(pod, served.volume).emptyDir, "the CSI-Addons socket is in a pod-local emptyDir, not on the host");
    assert.ok(!pod.containers.some((c) => c.name !== "csi-rbdplugin" && c !== sidecar && c.volumeMounts?.some((m) => m.name === served.volume)));
    // Ceph-CSI's other helpers keep their ports; ours do not collide with them (assertSidecarInPod).
    assert.ok(pod.hostNetwork);
  });

  test("the same patch in the driver's own kustomization gives the same DaemonSet (the sidecar beside the driver)", () => {
    const patched = findOne(
      renderOverlay(
        { namespace: "ceph-csi", resources: ["./csi-rbdplugin.yaml"], patches: [{ path: "sidecar-patch.yaml" }] },
        {
          "csi-rbdplugin.yaml": readCephManifest(rbd.manifest),
          "sidecar-patch.yaml": readFileSync(join(deployDir, "examples/ceph-csi-rbd/sidecar-patch.yaml"), "utf8"),
        },
      ),
      "DaemonSet",
    ) as DaemonSetDoc;
    assert.ok(section.includes("path: sidecar-patch.yaml"));
    afterStep4();
    // kustomize puts the containers a patch names first (the driver, then the sidecar); the API
    // server keeps the DaemonSet's order. Either way the same containers, volumes and the rest.
    // The same holds for the lists inside a container (env by name, volume mounts by path).
    const byName = <T extends { name: string }>(xs: T[]) => new Map(xs.map((x) => [x.name, x]));
    const sorted = (c: Container) => ({
      ...c,
      env: c.env?.toSorted((a, b) => a.name.localeCompare(b.name)),
      volumeMounts: c.volumeMounts?.toSorted((a, b) => a.mountPath.localeCompare(b.mountPath)),
    });
    const [l, k] = [live().spec.template, patched.spec.template];
    assert.deepEqual(byName(l.spec.containers.map(sorted)), byName(k.spec.containers.map(sorted)));
    assert.deepEqual(byName(l.spec.volumes), byName(k.spec.volumes));
    assert.deepEqual({ ...l, spec: { ...l.spec, containers: [], volumes: [] } }, { ...k, spec: { ...k.spec, containers: [], volumes: [] } });
    assert.deepEqual(
      k.spec.containers.map((c) => c.name),
      ["csi-rbdplugin", "csi-addons-healer", "driver-registrar", "liveness-prometheus"],
    );
  });

  test("step 5: for a driver without API access, the token goes to the sidecar only", () => {
    afterStep4();
    step(TOKEN, kubeconfig);
    const ds = live();
    assert.deepEqual(validateStrict(ds as K8sObject), []);
    const pod = ds.spec.template.spec;
    assert.equal(pod.automountServiceAccountToken, false);
    assertSidecarInPod(pod, "csi-addons-healer"); // checks the projected token is in the sidecar only, 3600 s
    assert.equal(flagsOf(containerOf(pod, "csi-addons-healer")).get("require-tls-files"), "true");
  });

  test("a DaemonSet laid out otherwise gets the same patch: containers are found by name, not position", () => {
    // The driver last instead of first, in a namespace of its own.
    const r = (args: string[], input?: string) => spawnSync("kubectl", args, { encoding: "utf8", input, env: { ...process.env, KUBECONFIG: kubeconfig } });
    const moved = structuredClone(original);
    moved.metadata = { name: "csi-rbdplugin", namespace: "ceph-csi-reordered" };
    moved.spec.template.spec.containers.reverse();
    const created = r(
      ["create", "-f", "-"],
      "---\n" + [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "ceph-csi-reordered" } }, moved].map((o) => JSON.stringify(o)).join("\n---\n"),
    );
    assert.equal(created.status, 0, created.stderr);
    const p = r([
      "-n",
      "ceph-csi-reordered",
      "patch",
      "daemonset",
      "csi-rbdplugin",
      "--patch-file",
      join(deployDir, "examples/ceph-csi-rbd/sidecar-patch.yaml"),
    ]);
    assert.equal(p.status, 0, p.stderr);
    const pod = (JSON.parse(r(["-n", "ceph-csi-reordered", "get", "daemonset", "csi-rbdplugin", "-o", "json"]).stdout) as DaemonSetDoc).spec.template.spec;
    assert.deepEqual(
      pod.containers.map((c) => c.name),
      ["liveness-prometheus", "driver-registrar", "csi-rbdplugin", "csi-addons-healer"],
    );
    const served = socketInVolume(pod, "csi-rbdplugin", driverAddonsEndpoint(containerOf(pod, "csi-rbdplugin")));
    assert.deepEqual(socketInVolume(pod, "csi-addons-healer", flagsOf(containerOf(pod, "csi-addons-healer")).get("csi-addons-address")!), served);
  });
});

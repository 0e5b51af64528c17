// deploy/README.md section 4, "Adding the sidecar to your driver", followed as a new user would:
// the commands are taken from the README (the test fails if one is not there verbatim) and run
// from the repository's root with kubectl, against the in-memory API server started as
// `npm run kube-api` would start it, seeded with a Ceph-CSI-like node plugin
// (test/deploy/fixtures/csi-rbdplugin.yaml). What the in-memory server cannot take is said where
// it happens: it serves no rbac.authorization.k8s.io, so step 2's `kubectl apply -k` is checked by
// rendering the same kustomization (its objects are validated in manifests.test.ts).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startTs, type Proc } from "../support/proc.js";
import { deployDir, findOne, noKubectl, parseYamlDocuments, renderOverlay, repoRoot, type K8sObject } from "./load.js";
import { SIDECAR_FLAGS, assertHardened, assertSidecarInPod, containerOf, flagsOf, mountOf, volumeOf, type DaemonSetDoc } from "./pod.js";
import { validateStrict } from "./validate.js";

const fixture = join(repoRoot, "test/deploy/fixtures/csi-rbdplugin.yaml");
const readme = readFileSync(join(deployDir, "README.md"), "utf8");
const section = readme.slice(readme.indexOf("## 4. Adding the sidecar to your driver"), readme.indexOf("## 5."));

/** Runs a command line of the README's section 4 (asserting it is there), with kubectl on `kubeconfig`. */
function step(line: string, kubeconfig?: string): string {
  assert.ok(section.includes(line), `deploy/README.md section 4 does not say: ${line}`);
  const [cmd, ...args] = line.split(/\s+/);
  const r = spawnSync(cmd!, args, { cwd: repoRoot, encoding: "utf8", env: { ...process.env, ...(kubeconfig ? { KUBECONFIG: kubeconfig } : {}) }, timeout: 60_000 });
  assert.equal(r.status, 0, `${line}\n${r.stderr}`);
  return r.stdout;
}

const RBAC = "kubectl kustomize deploy/examples/ceph-csi-rbd/";
const PATCH = "kubectl -n ceph-csi patch daemonset csi-rbdplugin --type json --patch-file deploy/examples/ceph-csi-rbd/sidecar-patch.yaml";
const TOKEN = "kubectl -n ceph-csi patch daemonset csi-rbdplugin --type json --patch-file deploy/examples/ceph-csi-rbd/token-patch.yaml";
const GET = ["-n", "ceph-csi", "get", "daemonset", "csi-rbdplugin", "-o", "json"];

describe("deploy/README.md: adding the sidecar to a Ceph-CSI-like driver", { skip: noKubectl }, () => {
  let api: Proc;
  let kubeconfig = "";
  const live = (): DaemonSetDoc => {
    const r = spawnSync("kubectl", GET, { encoding: "utf8", env: { ...process.env, KUBECONFIG: kubeconfig } });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as DaemonSetDoc;
  };
  const original = parseYamlDocuments(readFileSync(fixture, "utf8"), "fixture").find((o) => (o as K8sObject).kind === "DaemonSet") as DaemonSetDoc;
  /** The later steps start from step 4's patch, whether or not its test ran (a test run by name). */
  const afterStep4 = () => {
    if (!live().spec.template.spec.containers.some((c) => c.name === "csi-addons-healer")) step(PATCH, kubeconfig);
  };

  before(async () => {
    api = startTs("test/kube/cli.ts", ["--port", "0", "--seed", fixture]);
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
    assert.deepEqual(pod.containers.map((c) => c.name), [...before.containers.map((c) => c.name), "csi-addons-healer"]);
    assert.deepEqual(containerOf(pod, "driver-registrar"), containerOf(before, "driver-registrar"));
    assert.deepEqual(containerOf(pod, "liveness-prometheus"), containerOf(before, "liveness-prometheus"));
    assert.equal(pod.serviceAccountName, before.serviceAccountName, "the pod keeps the driver's ServiceAccount");

    const sidecar = containerOf(pod, "csi-addons-healer");
    const flags = assertSidecarInPod(pod, "csi-addons-healer");
    for (const f of flags.keys()) assert.ok(SIDECAR_FLAGS.has(f), `unknown sidecar flag --${f}`);
    assertHardened(sidecar, { root: true });

    // The driver's last --csi-addons-endpoint (Go's flag package keeps the last) is the sidecar's address.
    const driver = containerOf(pod, "csi-rbdplugin");
    const endpoint = driver.args!.filter((a) => a.startsWith("--csi-addons-endpoint=")).at(-1)!.split("=")[1]!;
    assert.equal(endpoint, flags.get("csi-addons-address"));
    const socket = endpoint.replace(/^unix:\/\//, "");
    const [s, d] = [mountOf(sidecar, socket), mountOf(driver, socket)];
    assert.equal(s.name, d.name);
    assert.ok(volumeOf(pod, s.name).emptyDir, "the CSI-Addons socket is in a pod-local emptyDir, not on the host");
    assert.ok(!pod.containers.some((c) => c !== driver && c !== sidecar && c.volumeMounts?.some((m) => m.name === s.name)));
    // Ceph-CSI's other helpers keep their ports; ours do not collide with them (assertSidecarInPod).
    assert.ok(pod.hostNetwork);
  });

  test("the same patch in the driver's own kustomization gives the same DaemonSet", () => {
    const patched = findOne(
      renderOverlay(
        { resources: ["./csi-rbdplugin.yaml"], patches: [{ path: "sidecar-patch.yaml", target: { kind: "DaemonSet", name: "csi-rbdplugin" } }] },
        { "csi-rbdplugin.yaml": readFileSync(fixture, "utf8"), "sidecar-patch.yaml": readFileSync(join(deployDir, "examples/ceph-csi-rbd/sidecar-patch.yaml"), "utf8") },
      ),
      "DaemonSet",
    ) as DaemonSetDoc;
    assert.ok(section.includes("path: sidecar-patch.yaml"));
    afterStep4();
    assert.deepEqual(live().spec.template, patched.spec.template);
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

  test("a DaemonSet laid out otherwise is refused, not mis-patched", () => {
    // A fresh object whose container 1 is not the driver: kubectl patch must fail on the test op.
    const r = spawnSync(
      "kubectl",
      ["-n", "ceph-csi", "patch", "daemonset", "csi-rbdplugin", "--type", "json", "-p", JSON.stringify([{ op: "test", path: "/spec/template/spec/containers/1/name", value: "not-the-driver" }])],
      { encoding: "utf8", env: { ...process.env, KUBECONFIG: kubeconfig } },
    );
    assert.notEqual(r.status, 0, "a failing JSON-patch test op must fail the patch");
  });
});

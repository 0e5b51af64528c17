// The example node plugin as `kubectl kustomize deploy/` renders it: the sidecar locked down,
// without host paths, on ports no common CSI sidecar takes, with required TLS files and its own
// token; the kubelet's directories checked to exist; Linux nodes only; the driver-stub from its
// own image; and deploy/README.md naming what the manifests use.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { deployDir, findOne, noKubectl, readKustomization, render } from "./load.js";
import { SIDECAR_FLAGS, assertHardened, assertSidecarInPod, containerOf, mountOf, volumeOf, type DaemonSetDoc } from "./pod.js";
import { sidecarServiceAccount } from "./rbac.js";

describe("example DaemonSet", { skip: noKubectl }, () => {
  const ds = (noKubectl ? { spec: { template: { metadata: { labels: {} }, spec: { containers: [], volumes: [] } } } } : findOne(render(""), "DaemonSet")) as DaemonSetDoc;
  const pod = ds.spec.template.spec;
  const readme = readFileSync(join(deployDir, "README.md"), "utf8");

  test("the sidecar: only flags it has; no host path; ports, probes, listen address, TLS and token as required", () => {
    const flags = assertSidecarInPod(pod, "csi-addons-healer");
    for (const f of flags.keys()) assert.ok(SIDECAR_FLAGS.has(f), `unknown sidecar flag --${f}`);
    assert.equal(flags.get("controller-port"), "9070");
    assert.equal(flags.get("http-endpoint"), ":9072");
    assert.equal(pod.automountServiceAccountToken, false, "the driver-stub needs no API access: the token goes to the sidecar only");
  });

  test("the sidecar runs non-root, read-only, without capabilities, with limits; the pod is not on the host network", () => {
    assertHardened(containerOf(pod, "csi-addons-healer"));
    assert.notEqual(pod.hostNetwork, true);
    assert.notEqual(pod.hostPID, true);
  });

  test("the sidecar dials the socket the driver serves, through an emptyDir both mount", () => {
    const sidecar = containerOf(pod, "csi-addons-healer");
    const driver = containerOf(pod, "driver");
    const address = sidecar.args!.find((a) => a.startsWith("--csi-addons-address="))!.split("=")[1]!;
    const args = driver.args ?? [];
    assert.equal(args[args.indexOf("--addons-endpoint") + 1], address);
    const socket = address.replace(/^unix:\/\//, "");
    const [s, d] = [mountOf(sidecar, socket), mountOf(driver, socket)];
    assert.equal(s.name, d.name);
    assert.equal(s.mountPath, d.mountPath);
    assert.ok(volumeOf(pod, s.name).emptyDir, "the socket volume should be a pod-local emptyDir");
    assert.notEqual(args[args.indexOf("--csi-endpoint") + 1], address, "the sidecar must never dial the CSI socket");
    assert.equal(pod.securityContext?.fsGroup, sidecar.securityContext?.runAsGroup, "fsGroup gives the sidecar the socket and the key");
  });

  test("the kubelet's directories must exist (hostPath type Directory); only the driver's own may be created", () => {
    const plugin = `/var/lib/kubelet/plugins/${(containerOf(pod, "driver").args ?? [])[1]}`;
    for (const v of pod.volumes.filter((x) => x.hostPath?.path.startsWith("/var/lib/kubelet"))) {
      if (v.hostPath!.path === plugin) assert.equal(v.hostPath!.type, "DirectoryOrCreate", v.name);
      else assert.equal(v.hostPath!.type, "Directory", `${v.name}: a wrong kubelet root must fail loudly`);
    }
    assert.ok(pod.volumes.some((v) => v.hostPath?.type === "Directory"));
  });

  test("Linux nodes only, system-node-critical, tolerating every taint", () => {
    assert.deepEqual(pod.nodeSelector, { "kubernetes.io/os": "linux" });
    assert.equal(pod.priorityClassName, "system-node-critical");
    assert.deepEqual((pod as { tolerations?: unknown }).tolerations, [{ operator: "Exists" }]);
  });

  test("the driver-stub runs from its own image, the sidecar from the production one", () => {
    const images = new Map(readKustomization().images!.map((i) => [i.name, `${i.newName}:${i.newTag}`]));
    assert.equal(containerOf(pod, "csi-addons-healer").image, images.get("csi-addons-healer"));
    assert.equal(containerOf(pod, "driver").image, images.get("csi-addons-healer-driver-stub"));
  });

  test("runs as the ServiceAccount base/ binds", () => {
    assert.equal(pod.serviceAccountName, sidecarServiceAccount);
  });

  test("the comment on the update strategy states the restart signal's contract", () => {
    const text = readFileSync(join(deployDir, "components/example-driver/daemonset.yaml"), "utf8");
    const comment = text.slice(text.indexOf("updateStrategy:"), text.indexOf("type: RollingUpdate"));
    assert.match(comment, /createdByPodUID/);
    assert.match(comment, /driverRestartedAt is not touched/);
  });

  test("deploy/README.md lists the pod's ports and uses the names the manifests use", () => {
    for (const c of pod.containers) for (const p of c.ports ?? []) assert.match(readme, new RegExp(`\\| ${p.containerPort} \\|`), `port ${p.containerPort} is not in the README's port table`);
    const driverArgs = containerOf(pod, "driver").args ?? [];
    const tlsSecret = pod.volumes.find((v) => v.secret)?.secret?.secretName;
    for (const name of [
      ds.metadata.name,
      readKustomization().namespace!,
      sidecarServiceAccount,
      tlsSecret!,
      driverArgs[driverArgs.indexOf("--name") + 1]!,
      `app.kubernetes.io/name=${ds.spec.template.metadata.labels["app.kubernetes.io/name"]}`,
      "system-node-critical",
      "seLinuxOptions",
      "--require-tls-files",
      "scripts/build-image.sh",
    ]) {
      assert.ok(readme.includes(name), `README does not mention ${name}`);
    }
  });
});

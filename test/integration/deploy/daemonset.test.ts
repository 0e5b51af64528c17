// The example node plugin as `kubectl kustomize deploy/` renders it: the sidecar locked down,
// without host paths, on ports no common CSI sidecar takes, with required TLS files and its own
// token; the whole pod within Pod Security "restricted"; Linux nodes only; the driver-stub from
// its own image; and deploy/README.md naming what the manifests use.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { deployDir, findOne, noKubectl, readKustomization, render } from "../../support/deploy/load.js";
import {
  SIDECAR_FLAGS,
  assertHardened,
  assertSidecarInPod,
  containerOf,
  mountOf,
  podSecurityRestrictedViolations,
  volumeOf,
  type DaemonSetDoc,
} from "../../support/deploy/pod.js";
import { sidecarServiceAccount } from "../../support/deploy/rbac.js";

describe("example DaemonSet", { skip: noKubectl }, () => {
  const ds = (
    noKubectl ? { spec: { template: { metadata: { labels: {} }, spec: { containers: [], volumes: [] } } } } : findOne(render(""), "DaemonSet")
  ) as DaemonSetDoc;
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

  test('the pod meets Pod Security "restricted", the level its namespace enforces', () => {
    const namespace = findOne(render(""), "Namespace");
    assert.equal(namespace.metadata.labels?.["pod-security.kubernetes.io/enforce"], "restricted");
    assert.deepEqual(podSecurityRestrictedViolations(pod), []);
    // The check refuses what a real node plugin needs (Ceph-CSI's csi-rbdplugin).
    const privileged = structuredClone(pod);
    privileged.volumes.push({ name: "plugin-dir", hostPath: { path: "/var/lib/kubelet/plugins", type: "Directory" } });
    Object.assign(containerOf(privileged, "driver").securityContext!, { privileged: true, runAsUser: 0 });
    assert.deepEqual(podSecurityRestrictedViolations({ ...privileged, hostNetwork: true }), [
      "hostNetwork: true",
      "volume plugin-dir: hostPath",
      "driver: privileged",
      "driver: runAsUser: 0",
    ]);
  });

  test("the driver runs as another user than the sidecar, and reaches it through the pod's fsGroup", () => {
    const [driver, sidecar] = [containerOf(pod, "driver").securityContext!, containerOf(pod, "csi-addons-healer").securityContext!];
    assert.notEqual(driver.runAsUser, sidecar.runAsUser);
    assert.equal(pod.securityContext?.fsGroup, sidecar.runAsGroup);
    assert.match((containerOf(pod, "driver").command ?? []).join(" "), /umask 0007 && exec /, "the socket is created group-writable");
  });

  test("Linux nodes only; no priority class or tolerations for a driver that serves no volume", () => {
    assert.deepEqual(pod.nodeSelector, { "kubernetes.io/os": "linux" });
    assert.equal(pod.priorityClassName, undefined);
    assert.equal(pod.tolerations, undefined);
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
    for (const c of pod.containers)
      for (const p of c.ports ?? [])
        assert.match(readme, new RegExp(`\\| ${p.containerPort} \\|`), `port ${p.containerPort} is not in the README's port table`);
    const driverArgs = containerOf(pod, "driver").args ?? [];
    const tlsSecret = pod.volumes.find((v) => v.secret)?.secret?.secretName;
    for (const name of [
      ds.metadata.name,
      readKustomization().namespace!,
      sidecarServiceAccount,
      tlsSecret!,
      driverArgs[driverArgs.indexOf("--name") + 1]!,
      `app.kubernetes.io/name=${ds.spec.template.metadata.labels["app.kubernetes.io/name"]}`,
      "seLinuxOptions",
      "--require-tls-files",
      "scripts/build-image.sh",
    ]) {
      assert.ok(readme.includes(name), `README does not mention ${name}`);
    }
  });
});

// deploy/examples/ceph-csi-{rbd,cephfs,rbd-provisioner} against Ceph-CSI's own manifests (never a
// copy written by hand): each sidecar-patch.yaml, rendered onto the manifest as a kustomization
// does, keeps every container of the original (names, order, images, and all but the named driver
// container untouched), puts the sidecar beside the driver, lines the sidecar's address up with
// the socket the driver serves, runs as the ServiceAccount the example's RBAC binds, and the
// result applies to the in-memory API server. The README's `kubectl patch` path: walkthrough.test.ts.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startTs, tempDir, type Proc } from "../../support/proc.js";
import {
  CEPH_EXAMPLES,
  driverAddonsEndpoint,
  noCephCsi,
  readCephManifest,
  socketInVolume,
  upstreamWorkload,
  type CephExample,
} from "../../support/deploy/ceph-csi.js";
import { deployDir, findOne, noKubectl, parseYamlDocuments, render, renderOverlay, type K8sObject } from "../../support/deploy/load.js";
import {
  SIDECAR_FLAGS,
  assertHardened,
  assertSidecarInPod,
  containerOf,
  flagsOf,
  listeningPorts,
  volumeOf,
  type DaemonSetDoc,
} from "../../support/deploy/pod.js";
import { validateStrict } from "../../support/deploy/validate.js";

const SIDECAR = "csi-addons-healer";
const skip = noKubectl || noCephCsi;

/** The example's sidecar-patch.yaml rendered onto ceph-csi's manifest, in the namespace ceph-csi. */
function patched(e: CephExample): K8sObject[] {
  return renderOverlay(
    { namespace: "ceph-csi", resources: ["./upstream.yaml"], patches: [{ path: "sidecar-patch.yaml" }] },
    { "upstream.yaml": readCephManifest(e.manifest), "sidecar-patch.yaml": readFileSync(join(deployDir, e.dir, "sidecar-patch.yaml"), "utf8") },
  );
}

describe("the Ceph-CSI examples on Ceph-CSI's own manifests", { skip }, () => {
  for (const e of CEPH_EXAMPLES) {
    describe(`${e.dir}: ${e.kind} ${e.name}`, () => {
      const objects = skip ? [] : patched(e);
      const workload = () => findOne(objects, e.kind, e.name) as DaemonSetDoc;
      const original = () => upstreamWorkload(e).spec.template.spec;

      test("keeps every container of the original, in order, and adds the sidecar beside the driver", () => {
        const pod = workload().spec.template.spec;
        const names = pod.containers.map((c) => c.name);
        assert.deepEqual(
          names.filter((n) => n !== SIDECAR),
          original().containers.map((c) => c.name),
        );
        assert.deepEqual(
          pod.containers.filter((c) => c.name !== SIDECAR).map((c) => c.image),
          original().containers.map((c) => c.image),
        );
        assert.equal(names.filter((n) => n === SIDECAR).length, 1);
        assert.equal(names.indexOf(SIDECAR), names.indexOf(e.driver) + 1, "the sidecar is beside the driver container");
        for (const c of original().containers.filter((x) => x.name !== e.driver)) assert.deepEqual(containerOf(pod, c.name), c, `${c.name} is changed`);
        // The driver keeps all it had (its args above all: a strategic merge patch would replace them whole).
        const [before, after] = [containerOf(original(), e.driver), containerOf(pod, e.driver)];
        assert.deepEqual(after.args, before.args);
        assert.deepEqual({ ...after, env: undefined, volumeMounts: undefined }, { ...before, env: undefined, volumeMounts: undefined });
        for (const m of before.volumeMounts ?? [])
          assert.deepEqual(
            after.volumeMounts?.find((x) => x.mountPath === m.mountPath),
            m,
          );
        for (const v of before.env ?? [])
          if (v.name !== "CSI_ADDONS_ENDPOINT")
            assert.deepEqual(
              after.env?.find((x) => x.name === v.name),
              v,
            );
        for (const v of original().volumes) assert.deepEqual(volumeOf(pod, v.name), v);
        assert.deepEqual(
          objects.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
          (parseYamlDocuments(readCephManifest(e.manifest), e.manifest) as K8sObject[]).map((o) => `${o.kind}/${o.metadata.name}`).sort(),
        );
      });

      test("the sidecar dials the socket the driver serves, in a pod-local emptyDir only the two mount", () => {
        const pod = workload().spec.template.spec;
        const served = socketInVolume(pod, e.driver, driverAddonsEndpoint(containerOf(pod, e.driver)));
        const dialed = socketInVolume(pod, SIDECAR, flagsOf(containerOf(pod, SIDECAR)).get("csi-addons-address")!);
        assert.deepEqual(dialed, served);
        assert.deepEqual(volumeOf(pod, served.volume).emptyDir, {}, "the socket is pod-local, not on the host");
        const holders = pod.containers.filter((c) => c.volumeMounts?.some((m) => m.name === served.volume)).map((c) => c.name);
        assert.deepEqual(holders.sort(), [e.driver, SIDECAR].sort());
        // The driver's CSI socket (kubelet's) stays where it was, out of the sidecar's reach.
        assert.ok(!containerOf(pod, SIDECAR).volumeMounts?.some((m) => m.mountPath === "/csi" || m.name === "socket-dir"));
      });

      test("the sidecar: its own flags only, env from the downward API, TLS, ports free in the pod, hardened", () => {
        const pod = workload().spec.template.spec;
        assert.equal(pod.hostNetwork, original().hostNetwork);
        const flags = assertSidecarInPod(pod, SIDECAR); // NODE_ID, POD_NAME/NAMESPACE/UID(/IP), ports, probes, TLS, token
        for (const f of flags.keys()) assert.ok(SIDECAR_FLAGS.has(f), `unknown sidecar flag --${f}`);
        assertHardened(containerOf(pod, SIDECAR), { root: true });
        assert.equal(flags.has("leader-election-lease-duration"), e.kind === "Deployment", "controller plugins elect a leader");
        assert.deepEqual(validateStrict(workload()), []);
      });

      test("runs as the ServiceAccount the example's RBAC binds, in the driver's namespace", () => {
        const pod = workload().spec.template.spec;
        assert.equal(pod.serviceAccountName, original().serviceAccountName);
        const bindings = render(e.dir).filter((o) => o.kind.endsWith("Binding")) as (K8sObject & { subjects: unknown })[];
        // base/'s two; a controller plugin (it takes part in the Lease election) also components/controller-plugin-lease's.
        assert.equal(bindings.length, e.kind === "Deployment" ? 3 : 2, bindings.map((b) => b.metadata.name).join(", "));
        for (const b of bindings)
          assert.deepEqual(b.subjects, [{ kind: "ServiceAccount", name: pod.serviceAccountName, namespace: workload().metadata.namespace }]);
      });
    });
  }

  test("the RBD and CephFS node plugins' sidecars, both on the host network of every node, take different ports", () => {
    const ports = (dir: string) =>
      listeningPorts(containerOf((findOne(patched(CEPH_EXAMPLES.find((e) => e.dir === dir)!), "DaemonSet") as DaemonSetDoc).spec.template.spec, SIDECAR));
    const [rbd, cephfs] = [ports("examples/ceph-csi-rbd"), ports("examples/ceph-csi-cephfs")];
    assert.equal(rbd.length, 2);
    assert.deepEqual(
      rbd.filter((p) => cephfs.includes(p)),
      [],
    );
  });

  describe("applied to the API server", () => {
    // A process of its own, as `npm run kube-api` runs it: kubectl is run synchronously here.
    let api: Proc;
    let kubeconfig = "";
    before(async () => {
      const seed = join(tempDir("ceph-csi-seed-"), "namespace.yaml");
      writeFileSync(seed, "apiVersion: v1\nkind: Namespace\nmetadata: {name: ceph-csi}\n");
      api = startTs("test/kube/cli.ts", ["--port", "0", "--seed", seed]);
      await api.waitForOutput(/kubeconfig: \S+\n/, 30_000);
      kubeconfig = /kubeconfig: (\S+)/.exec(api.stdout())![1]!;
    });
    after(async () => {
      await api?.stop();
    });

    for (const e of CEPH_EXAMPLES) {
      test(`${e.dir}: kubectl apply takes the patched ${e.kind} as rendered`, () => {
        // The workload only: the in-memory server serves no Services (the manifests' other
        // objects, which the patch does not touch: see the first test).
        const rendered = findOne(patched(e), e.kind, e.name) as DaemonSetDoc;
        const file = join(tempDir("ceph-csi-apply-"), "patched.json");
        writeFileSync(file, JSON.stringify(rendered));
        const kubectl = (...args: string[]) =>
          spawnSync("kubectl", args, { encoding: "utf8", env: { ...process.env, KUBECONFIG: kubeconfig }, timeout: 60_000 });
        const applied = kubectl("apply", "-f", file);
        assert.equal(applied.status, 0, applied.stderr);
        const got = kubectl("-n", "ceph-csi", "get", e.kind.toLowerCase(), e.name, "-o", "json");
        assert.equal(got.status, 0, got.stderr);
        assert.deepEqual((JSON.parse(got.stdout) as DaemonSetDoc).spec.template, rendered.spec.template);
      });
    }
  });
});

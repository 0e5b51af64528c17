// A controller plugin's sidecars (the driver advertises CONTROLLER_SERVICE) elect one holder of
// the Lease "<driver name, normalised>-csi-addons" in their namespace, holder = pod name, as the
// upstream sidecar does and the upstream controller reads; node plugins take no part. Two real
// sidecar processes in a Deployment's two pods, one driver-stub, the in-memory API's Leases (real
// resourceVersion conflicts).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi } from "../../kube/index.js";
import { leaseName } from "../../../sidecar/election/lease-name.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { waitFor } from "../../support/wait.js";
import { DRIVER, NAMESPACE } from "../../support/fixtures.js";

const LEASE = "stub-csi-example-com-csi-addons";
const DEPLOYMENT = "csi-provisioner";
const RS = "csi-provisioner-5d8f9c7b6";
const PODS = [`${RS}-aaaaa`, `${RS}-bbbbb`] as const;
const NODES = ["node-a", "node-b"] as const;

type Obj = Record<string, any>;

function controllerPluginObjects(): Obj[] {
  const labels = { app: DEPLOYMENT };
  const template = { metadata: { labels }, spec: { containers: [{ name: "csi-addons", image: "healer:dev" }] } };
  const owner = (kind: string, name: string, uid: string) => [{ apiVersion: "apps/v1", kind, name, uid, controller: true, blockOwnerDeletion: true }];
  const deployUid = "9b0c7c1e-0000-4a4a-9d9d-00000000000d";
  const rsUid = "9b0c7c1e-0000-4a4a-9d9d-00000000000e";
  return [
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: DEPLOYMENT, namespace: NAMESPACE, uid: deployUid },
      spec: { selector: { matchLabels: labels }, template },
    },
    {
      apiVersion: "apps/v1",
      kind: "ReplicaSet",
      metadata: { name: RS, namespace: NAMESPACE, uid: rsUid, labels, ownerReferences: owner("Deployment", DEPLOYMENT, deployUid) },
      spec: { selector: { matchLabels: labels }, template },
    },
    ...PODS.map((name, i) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: NAMESPACE, labels, ownerReferences: owner("ReplicaSet", RS, rsUid) },
      spec: { nodeName: NODES[i], containers: template.spec.containers },
    })),
    ...NODES.map((name) => ({ apiVersion: "v1", kind: "Node", metadata: { name }, status: { volumesInUse: [] } })),
  ];
}

let kube: KubeApi;
const lease = () => kube.get("coordination.k8s.io/v1", "Lease", NAMESPACE, LEASE) as Obj | undefined;
const holder = () => lease()?.spec.holderIdentity as string | undefined;

function startCandidate(stub: DriverStub, i: 0 | 1, election: string[]): Promise<SidecarProc> {
  return startSidecarProc({ driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath, pod: PODS[i], nodeId: NODES[i], args: election });
}

test("the Lease name is upstream's normalisation of the driver name", () => {
  assert.equal(leaseName(DRIVER), LEASE);
  assert.equal(leaseName("rook-ceph.rbd.csi.ceph.com"), "rook-ceph-rbd-csi-ceph-com-csi-addons");
  assert.equal(leaseName("My_Driver."), "My-Driver-X-csi-addons");
});

describe("a controller plugin's two sidecars", () => {
  let stub: DriverStub;
  const running: SidecarProc[] = [];

  before(async () => {
    kube = await startTestKube(controllerPluginObjects());
    stub = await startDriverStub({ state: { capabilities: { controllerService: true } } });
  });

  after(async () => {
    for (const s of running) await s.stop();
    await stub?.stop();
    await kube?.stop();
  });

  test("one holds the Lease, the other waits; SIGTERM releases it and the other takes over long before it would expire", async () => {
    // A lease duration far longer than the waits below: only a release lets the second one in that soon.
    const election = ["--leader-election-lease-duration=60s", "--leader-election-renew-deadline=40s", "--leader-election-retry-period=300ms"];
    const first = await startCandidate(stub, 0, election);
    running.push(first);
    await waitFor("the first sidecar holding the Lease", () => holder() === PODS[0], { timeoutMs: 20_000 });
    const held = lease()!;
    assert.equal(held.spec.leaseDurationSeconds, 60);
    assert.equal(held.spec.leaseTransitions, 0);
    assert.match(held.spec.renewTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/, "MicroTime");

    const second = await startCandidate(stub, 1, election);
    running.push(second);
    await second.proc.waitForOutput("taking part in the controller plugin's leader election", 20_000);
    // While the second one tries (every retry period), the first renews and keeps the Lease.
    const renewals = new Set<string>();
    await waitFor(
      "three renewals by the first sidecar",
      () => {
        assert.equal(holder(), PODS[0], "the Lease changed hands while its holder was alive");
        renewals.add(lease()!.spec.renewTime);
        return renewals.size >= 3;
      },
      { timeoutMs: 20_000 },
    );
    assert.equal(lease()!.spec.leaseTransitions, 0);
    assert.equal(first.logLines().filter((l) => String(l["message"]).startsWith("became the leader")).length, 1);
    assert.equal(second.logLines().filter((l) => String(l["message"]).startsWith("became the leader")).length, 0);

    assert.equal(await first.stop(), 0);
    assert.ok(first.logLines().some((l) => l["message"] === "released the Lease"));
    await waitFor("the second sidecar holding the Lease", () => holder() === PODS[1], { timeoutMs: 20_000 });
    assert.equal(lease()!.spec.leaseTransitions, 1);
    assert.equal(lease()!.spec.leaseDurationSeconds, 60);

    assert.equal(await second.stop(), 0);
    assert.equal(holder(), "", "released on SIGTERM");
    running.length = 0;
  });

  test("a holder that dies without releasing (SIGKILL): the other takes over once the Lease expired", async () => {
    const election = ["--leader-election-lease-duration=3s", "--leader-election-renew-deadline=2s", "--leader-election-retry-period=300ms"];
    const first = await startCandidate(stub, 0, election);
    running.push(first);
    await waitFor("the first sidecar holding the Lease", () => holder() === PODS[0], { timeoutMs: 20_000 });
    const before = lease()!.spec.leaseTransitions as number;
    const second = await startCandidate(stub, 1, election);
    running.push(second);
    await second.proc.waitForOutput("taking part in the controller plugin's leader election", 20_000);
    first.proc.child.kill("SIGKILL");
    await first.proc.exited;
    assert.equal(holder(), PODS[0], "nobody released it");
    await waitFor("the second sidecar holding the Lease", () => holder() === PODS[1], { timeoutMs: 30_000 });
    assert.equal(lease()!.spec.leaseTransitions, before + 1);
  });
});

describe("a node plugin's sidecar", () => {
  test("takes part in no Lease", async () => {
    kube = await startTestKube();
    const stub = await startDriverStub({});
    const sidecar = await startSidecarProc({
      driverSocket: stub.addonsSocket,
      kubeconfig: kube.kubeconfigPath,
      args: ["--leader-election-retry-period=300ms", "--leader-election-renew-deadline=1s", "--leader-election-lease-duration=2s"],
    });
    try {
      await waitHealth(sidecar, "SERVING");
      await sidecar.proc.waitForOutput("the driver has no CONTROLLER_SERVICE capability: not taking part in leader election");
      assert.equal(kube.counters.total({ resource: "leases" }), 0);
      assert.deepEqual(kube.list("coordination.k8s.io/v1", "Lease", NAMESPACE), []);
    } finally {
      await sidecar.stop();
      await stub.stop();
      await kube.stop();
    }
  });
});

// Pods healed, not just volumes: after a driver restart the sidecar tells the driver which pods on
// its node use each volume (one publish target per pod, at the kubelet's path), the driver answers
// per target, and the controller reports each pod: an Event on the pod (whole again, or to be
// restarted), one on the claim naming the pods to restart, and a metric. With
// --restart-pods-not-healed-in-place it evicts each pod left with a dead mount, once, through the
// Eviction API: a PodDisruptionBudget that allows no disruption delays it until it allows one; a pod
// no controller owns is only reported. Real processes: the in-memory API, the driver-stub (a
// FUSE-like and a re-attach data path), the sidecar, the controller.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { startControllerProc, type ControllerProc } from "../../support/controller.js";
import { waitFor } from "../../support/wait.js";
import { NAMESPACE, NODE } from "../../support/fixtures.js";
import { handleOf, started, startStack, type Stack } from "../../support/stack.js";

const KUBELET = "/var/lib/kubelet";
const uid = { fuse: randomUUID(), orphan: randomUUID(), prop: randomUUID(), block: randomUUID(), elsewhere: randomUUID() };
const OWNER = { apiVersion: "apps/v1", kind: "ReplicaSet", name: "app-6d4f", uid: randomUUID(), controller: true };

/** A running pod mounting `claim` in one container with `propagation` (unset: the default, None). */
function appPod(name: string, podUid: string, claim: string, o: { propagation?: string; nodeName?: string; block?: boolean; owned?: boolean } = {}) {
  const use = o.block
    ? { volumeDevices: [{ name: "data", devicePath: "/dev/xvda" }] }
    : { volumeMounts: [{ name: "data", mountPath: "/data", ...(o.propagation ? { mountPropagation: o.propagation } : {}) }] };
  return started({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: NAMESPACE, uid: podUid, labels: { app: name }, ...(o.owned === false ? {} : { ownerReferences: [OWNER] }) },
    spec: {
      nodeName: o.nodeName ?? NODE,
      containers: [{ name: "app", image: "app:1", ...use }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }],
    },
    status: { phase: "Running" },
  });
}

type Ev = { reason: string; type: string; message: string; involvedObject: { kind: string; name: string; uid?: string } };
let stack: Stack;
let controller: ControllerProc;

before(async () => {
  stack = await startStack({
    volumes: { "pv-fuse": { dataPath: "fuse" }, "pv-block": { dataPath: "reattach" } },
    block: ["pv-block"],
    claims: { "pv-fuse": "data-fuse", "pv-block": "data-block" },
    extra: [
      appPod("app-fuse", uid.fuse, "data-fuse"),
      // No controller owns it: evicted, it would not come back.
      appPod("app-orphan", uid.orphan, "data-fuse", { owned: false }),
      appPod("app-prop", uid.prop, "data-fuse", { propagation: "HostToContainer" }),
      appPod("app-block", uid.block, "data-block", { block: true }),
      // The same claim used on another node (RWX): never this node's business.
      appPod("app-elsewhere", uid.elsewhere, "data-fuse", { nodeName: "node-2", propagation: "HostToContainer" }),
      // app-fuse's budget: no disruption allowed until the test says so.
      {
        apiVersion: "policy/v1",
        kind: "PodDisruptionBudget",
        metadata: { name: "app-fuse", namespace: NAMESPACE },
        spec: { minAvailable: 1, selector: { matchLabels: { app: "app-fuse" } } },
        status: { observedGeneration: 1, disruptionsAllowed: 0, desiredHealthy: 1, currentHealthy: 1, expectedPods: 1 },
      },
    ],
  });
  await stack.startSidecar();
  controller = await startControllerProc({
    kubeconfig: stack.kube.kubeconfigPath,
    args: ["--restart-pods-not-healed-in-place", "--retry-initial-backoff=100ms", "--retry-max-backoff=1s"],
  });
  await stack.waitHandled();
});

after(async () => {
  await controller?.stop();
  await stack?.stop();
});

const events = () => stack.kube.list("v1", "Event", NAMESPACE) as Ev[];
const lastHealOf = (pv: string) =>
  stack.stub.calls({ method: "/healer.v1.VolumeHealerNode/NodeHealVolume", volumeId: handleOf(pv) }).at(-1)?.request as Record<string, any>;

test("after a driver restart the driver is told why and for whom: one target per pod on this node, at the kubelet's path for filesystem and block", async () => {
  await stack.crashDriver();
  await stack.waitHandled();
  const fuse = lastHealOf("pv-fuse");
  assert.equal(fuse["reason"], "DRIVER_RESTARTED");
  assert.deepEqual(
    [...fuse["targets"]].sort((a, b) => a.podName.localeCompare(b.podName)),
    [
      // A filesystem volume: pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount (csi_mounter.go).
      {
        targetPath: `${KUBELET}/pods/${uid.fuse}/volumes/kubernetes.io~csi/pv-fuse/mount`,
        podNamespace: NAMESPACE,
        podName: "app-fuse",
        podUid: uid.fuse,
        mountPropagation: "NONE",
      },
      {
        targetPath: `${KUBELET}/pods/${uid.orphan}/volumes/kubernetes.io~csi/pv-fuse/mount`,
        podNamespace: NAMESPACE,
        podName: "app-orphan",
        podUid: uid.orphan,
        mountPropagation: "NONE",
      },
      {
        targetPath: `${KUBELET}/pods/${uid.prop}/volumes/kubernetes.io~csi/pv-fuse/mount`,
        podNamespace: NAMESPACE,
        podName: "app-prop",
        podUid: uid.prop,
        mountPropagation: "HOST_TO_CONTAINER",
      },
    ],
  );
  assert.ok(!JSON.stringify(stack.stub.calls()).includes(uid.elsewhere), "a pod on another node is never named");
  const block = lastHealOf("pv-block");
  // A block volume: plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<uid> (csi_block.go).
  assert.deepEqual(block["targets"], [
    {
      targetPath: `${KUBELET}/plugins/kubernetes.io/csi/volumeDevices/publish/pv-block/${uid.block}`,
      podNamespace: NAMESPACE,
      podName: "app-block",
      podUid: uid.block,
      mountPropagation: "NONE",
    },
  ]);
});

test("each pod is reported: the FUSE pod without propagation must be restarted (Warning on the pod and its claim), the others are whole in place; a metric by state", async () => {
  const byPod = (name: string) =>
    waitFor(`an Event on pod ${name}`, () => events().find((e) => e.involvedObject.kind === "Pod" && e.involvedObject.name === name));
  const fuse = await waitFor("app-fuse's restart Event", () =>
    events().find((e) => e.involvedObject.name === "app-fuse" && e.reason === "VolumeRestartNeeded"),
  );
  assert.deepEqual([fuse.type, fuse.reason, fuse.involvedObject.uid], ["Warning", "VolumeRestartNeeded", uid.fuse]);
  assert.match(fuse.message, /^volume pv-fuse was healed by stub\.csi\.example\.com on node node-1, but this pod still sees the dead mount; restart the pod: /);
  for (const [name, podUid] of [
    ["app-prop", uid.prop],
    ["app-block", uid.block],
  ] as const) {
    const e = await byPod(name);
    assert.deepEqual([e.type, e.reason, e.involvedObject.uid], ["Normal", "VolumeWholeInPlace", podUid], name);
  }
  const claim = await waitFor("the claim's Event", () =>
    events().find((e) => e.involvedObject.kind === "PersistentVolumeClaim" && e.reason === "PodsRestartNeeded"),
  );
  assert.equal(claim.involvedObject.name, "data-fuse");
  assert.ok(claim.message.endsWith(`2 pod(s) still see the dead mount until restarted: ${NAMESPACE}/app-fuse, ${NAMESPACE}/app-orphan`), claim.message);
  assert.ok(!events().some((e) => e.involvedObject.name === "app-elsewhere"), "nothing about the pod on another node");
  const metrics = await controller.metrics();
  assert.match(metrics, /csi_addons_healer_heal_pods_total\{driver="stub\.csi\.example\.com",state="RESTART_NEEDED"\} 2\b/);
  assert.match(metrics, /csi_addons_healer_heal_pods_total\{driver="stub\.csi\.example\.com",state="WHOLE_IN_PLACE"\} 2\b/);
});

test("with --restart-pods-not-healed-in-place: the pod its budget protects is evicted once the budget allows it; one no controller owns is only reported; pods whole in place are left running", async () => {
  const on = (name: string, reason: string) =>
    waitFor(`${reason} on ${name}`, () => events().find((e) => e.involvedObject.name === name && e.reason === reason), { timeoutMs: 30_000 });
  const delayed = await on("app-fuse", "PodEvictionDelayed");
  assert.match(delayed.message, /waits for its disruption budget: The disruption budget app-fuse needs 1 healthy pods and has 1 currently$/);
  assert.ok(stack.kube.get("v1", "Pod", NAMESPACE, "app-fuse"), "kept while its budget allows no disruption");
  const skipped = await on("app-orphan", "PodRestartSkipped");
  assert.match(skipped.message, /no controller owns it, so it would not come back/);
  // Another replica became healthy: the disruption controller would now allow one.
  const pdb = stack.kube.get("policy/v1", "PodDisruptionBudget", NAMESPACE, "app-fuse") as Record<string, any>;
  stack.kube.update({ ...pdb, status: { ...pdb.status, disruptionsAllowed: 1, currentHealthy: 2 } });
  const evicted = await on("app-fuse", "PodEvicted");
  assert.equal(evicted.involvedObject.uid, uid.fuse);
  assert.equal(stack.kube.get("v1", "Pod", NAMESPACE, "app-fuse"), undefined);
  const budget = stack.kube.get("policy/v1", "PodDisruptionBudget", NAMESPACE, "app-fuse") as Record<string, any>;
  assert.deepEqual([budget.status.disruptionsAllowed, Object.keys(budget.status.disruptedPods)], [0, ["app-fuse"]], "through the Eviction API");
  for (const name of ["app-orphan", "app-prop", "app-block"]) assert.ok(stack.kube.get("v1", "Pod", NAMESPACE, name), `${name} left running`);
  assert.ok(!events().some((e) => e.involvedObject.name === "app-elsewhere"), "nothing about the pod on another node");
  const metrics = await controller.metrics();
  assert.match(metrics, /csi_addons_healer_pod_evictions_total\{driver="stub\.csi\.example\.com",result="evicted"\} 1\b/);
  assert.match(metrics, /csi_addons_healer_pod_evictions_total\{driver="stub\.csi\.example\.com",result="skipped"\} 1\b/);
  assert.match(metrics, /csi_addons_healer_pod_evictions_total\{driver="stub\.csi\.example\.com",result="delayed"\} [1-9]/);
});

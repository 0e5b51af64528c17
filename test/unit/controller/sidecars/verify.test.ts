// Where the controller sends a node's token: each way a CSIAddonsNode's endpoint can point
// elsewhere than its node's sidecar pod is refused with its own reason, and the real one passes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EndpointRefusedError, verifyAddress, verifySidecarPod, type RefusalKind, type VerifyPolicy } from "../../../../controller/sidecars/verify.js";
import { parseEndpoint, type Endpoint } from "../../../../controller/sidecars/endpoint.js";
import type { SidecarInfo, SidecarPod } from "../../../../controller/plan/types.js";
import { CREATED_BY_POD_UID } from "../../../../controller/plan/trigger.js";

const DAEMONSET = { kind: "DaemonSet", name: "csi-rbdplugin", uid: "ds-uid", controller: true };
/** Node A's CSIAddonsNode, as its sidecar writes it. */
const NODE_A: SidecarInfo = {
  key: "ceph-csi/node-a-ceph-csi-daemonset-csi-rbdplugin",
  namespace: "ceph-csi",
  name: "node-a-ceph-csi-daemonset-csi-rbdplugin",
  uid: "can-uid",
  driver: "rbd.csi.ceph.com",
  endpoint: "pod://csi-rbdplugin-aaaaa.ceph-csi:9070",
  nodeId: "node-a",
  annotations: { [CREATED_BY_POD_UID]: "pod-a" },
  owners: [DAEMONSET],
  deleting: false,
};
/** Node A's node-plugin pod. */
const POD_A: SidecarPod = { uid: "pod-a", nodeName: "node-a", ip: "10.0.0.1", serviceAccount: "rbd-csi-nodeplugin", owners: [DAEMONSET] };
const ANY: VerifyPolicy = { serviceAccounts: [], allowUnverified: false };

const podEp = (s: SidecarInfo) => parseEndpoint(s.endpoint) as Extract<Endpoint, { kind: "pod" }>;
function refusal(f: () => void): { kind: RefusalKind; message: string } | undefined {
  try {
    f();
    return undefined;
  } catch (err) {
    assert.ok(err instanceof EndpointRefusedError, String(err));
    return { kind: err.kind, message: err.message };
  }
}

test("node A's own sidecar pod is called: same namespace, on node A, the pod that made the object, the object's owner's pod", () => {
  assert.equal(
    refusal(() => verifySidecarPod(NODE_A, podEp(NODE_A), POD_A, ANY)),
    undefined,
  );
  // Owned by the pod itself (a pod without a controller, or one of a Deployment's ReplicaSet).
  const ownPod = { ...NODE_A, owners: [{ kind: "Pod", name: "csi-rbdplugin-aaaaa", uid: "pod-a" }] };
  assert.equal(
    refusal(() => verifySidecarPod(ownPod, podEp(ownPod), { ...POD_A, owners: [] }, ANY)),
    undefined,
  );
  // An object made by the upstream sidecar carries no createdByPodUID: the other facts still hold it.
  const { [CREATED_BY_POD_UID]: _none, ...noUid } = NODE_A.annotations;
  assert.equal(
    refusal(() => verifySidecarPod({ ...NODE_A, annotations: noUid }, podEp(NODE_A), POD_A, ANY)),
    undefined,
  );
});

test("a forged CSIAddonsNode claiming node A is refused, each way with its reason, naming the pod and never a token", () => {
  const cases: { name: string; s?: Partial<SidecarInfo>; pod?: Partial<SidecarPod>; policy?: VerifyPolicy; kind: RefusalKind; says: RegExp }[] = [
    {
      name: "a pod on another node",
      pod: { nodeName: "node-b" },
      kind: "node",
      says: /pod ceph-csi\/csi-rbdplugin-aaaaa runs on node node-b, not on node node-a that the CSIAddonsNode claims/,
    },
    { name: "a pod not scheduled yet", pod: { nodeName: "" }, kind: "node", says: /is not scheduled to a node, not on node node-a/ },
    {
      name: "a pod of another namespace",
      s: { endpoint: "pod://attacker.other-ns:9070" },
      kind: "namespace",
      says: /names pod other-ns\/attacker, outside the CSIAddonsNode's namespace ceph-csi/,
    },
    {
      name: "another pod than the one that made the object",
      pod: { uid: "pod-z" },
      kind: "pod",
      says: /is not the pod that made the CSIAddonsNode \(uid pod-a, the pod's is pod-z\)/,
    },
    {
      name: "a pod of another owner",
      pod: { owners: [{ kind: "DaemonSet", name: "evil", uid: "evil-uid", controller: true }] },
      kind: "owner",
      says: /owned by DaemonSet csi-rbdplugin, which is neither pod ceph-csi\/csi-rbdplugin-aaaaa nor its controller/,
    },
    { name: "an object with no owner", s: { owners: [] }, kind: "owner", says: /the CSIAddonsNode has no owner/ },
    {
      name: "a pod of an unexpected ServiceAccount",
      pod: { serviceAccount: "default" },
      policy: { serviceAccounts: ["ceph-csi/rbd-csi-nodeplugin"], allowUnverified: false },
      kind: "service-account",
      says: /runs as ServiceAccount ceph-csi\/default, not one of --sidecar-service-accounts/,
    },
  ];
  for (const c of cases) {
    const s = { ...NODE_A, ...c.s };
    const got = refusal(() => verifySidecarPod(s, podEp(s), { ...POD_A, ...c.pod }, c.policy ?? ANY));
    assert.ok(got, `${c.name}: refused`);
    assert.equal(got.kind, c.kind, c.name);
    assert.match(got.message, c.says, c.name);
    assert.match(got.message, /not called$/, c.name);
  }
  // The expected ServiceAccount passes.
  const named = { serviceAccounts: ["ceph-csi/other", "ceph-csi/rbd-csi-nodeplugin"], allowUnverified: false };
  assert.equal(
    refusal(() => verifySidecarPod(NODE_A, podEp(NODE_A), POD_A, named)),
    undefined,
  );
});

test("a plain host:port names no pod: refused unless the unsafe choice is made", () => {
  const plain = { ...NODE_A, endpoint: "10.0.0.66:9070" };
  const got = refusal(() => verifyAddress(plain, ANY));
  assert.equal(got?.kind, "unverifiable");
  assert.match(got!.message, /endpoint 10\.0\.0\.66:9070 names no pod, so it cannot be verified as node node-a's sidecar/);
  assert.equal(
    refusal(() => verifyAddress(plain, { serviceAccounts: [], allowUnverified: true })),
    undefined,
  );
});

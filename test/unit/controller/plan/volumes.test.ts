// plan/: pure decisions over plain objects — which volumes a sidecar has, when and how to heal,
// which answers to retry and how long to wait.
import { test } from "node:test";
import assert from "node:assert/strict";
import { status } from "@grpc/grpc-js";
import { volumesOfClaims, volumesOfSidecar, withVolumes, type VolumeSources } from "../../../../controller/plan/volumes.js";
import { HANDLED_RESTART, canRun, decideRestart, restartMarker, restartTime } from "../../../../controller/plan/trigger.js";
import { backoffMs, isRetryable, jittered } from "../../../../controller/plan/retry.js";
import type { PvInfo } from "../../../../controller/plan/types.js";

const DRV = "drv.example.com";
const pv = (name: string, o: Partial<PvInfo> = {}): PvInfo => ({
  name,
  uid: `uid-${name}`,
  driver: DRV,
  handle: `h-${name}`,
  deleting: false,
  claim: undefined,
  ...o,
});

function sources(pvs: PvInfo[], o: Partial<VolumeSources> = {}): VolumeSources {
  return {
    attachments: [],
    volumesInUse: [],
    pvByName: (n) => pvs.find((p) => p.name === n),
    pvsByHandle: (d, h) => pvs.filter((p) => p.driver === d && p.handle === h),
    ...o,
  };
}

test("volumes of a sidecar: attached VolumeAttachments of its driver and node, plus volumesInUse, deduplicated", () => {
  const pvs = [pv("a"), pv("b"), pv("c"), pv("other", { driver: "other.example.com", handle: "h-o" }), pv("gone", { deleting: true }), pv("d")];
  const got = volumesOfSidecar(
    { driver: DRV, nodeId: "n1" },
    sources(pvs, {
      attachments: [
        { attacher: DRV, nodeName: "n1", pvName: "a", attached: true },
        { attacher: DRV, nodeName: "n1", pvName: "b", attached: false },
        { attacher: DRV, nodeName: "n2", pvName: "c", attached: true },
        { attacher: "other.example.com", nodeName: "n1", pvName: "other", attached: true },
        { attacher: DRV, nodeName: "n1", pvName: "gone", attached: true },
        { attacher: DRV, nodeName: "n1", pvName: "missing", attached: true },
      ],
      volumesInUse: [
        `kubernetes.io/csi/${DRV}^h-a`,
        `kubernetes.io/csi/${DRV}^h-d`,
        "kubernetes.io/csi/other.example.com^h-o",
        "kubernetes.io/rbd/x",
        `kubernetes.io/csi/${DRV}^unknown`,
      ],
    }),
  );
  assert.deepEqual(
    got.map((p) => p.name),
    ["a", "d"],
  );
});

test("volumes of the claims a node's Pods mount: its driver's, not being deleted, each once, none with an attachment to the node", () => {
  const pvs = {
    "ns/a": [pv("a")],
    "ns/b": [pv("b")],
    "ns/o": [pv("other", { driver: "other.example.com" })],
    "ns/g": [pv("gone", { deleting: true })],
    "ns/two": [pv("a"), pv("c")],
  };
  const got = volumesOfClaims({ driver: DRV, nodeId: "n1" }, ["ns/a", "ns/b", "ns/o", "ns/g", "ns/two", "ns/none"], {
    attachments: [{ attacher: DRV, nodeName: "n1", pvName: "b", attached: false }],
    pvsByClaim: (c) => pvs[c as keyof typeof pvs] ?? [],
  });
  assert.deepEqual(got.map((p) => p.name).sort(), ["a", "c"], "b waits for its attachment, whatever it says");
  assert.deepEqual(
    withVolumes([pv("a")], got).map((p) => p.name),
    ["a", "c"],
    "added after the known ones, once",
  );
});

test("volumes of a sidecar come in name order, whatever order the sources list them in", () => {
  const names = ["pvc-9", "pvc-10", "pvc-1.b", "pvc-1-a", "pvc-z", "pvc-0"];
  const got = volumesOfSidecar(
    { driver: DRV, nodeId: "n1" },
    sources(
      names.map((n) => pv(n)),
      { attachments: names.map((n) => ({ attacher: DRV, nodeName: "n1", pvName: n, attached: true })) },
    ),
  );
  assert.deepEqual(
    got.map((p) => p.name),
    ["pvc-0", "pvc-1-a", "pvc-1.b", "pvc-10", "pvc-9", "pvc-z"],
  );
});

test("a handle in use that several PVs name gives every one of them not being deleted: which one is staged here, volumesInUse does not say", () => {
  const pvs = [pv("old", { handle: "shared", deleting: true }), pv("new", { handle: "shared" }), pv("ns-2", { handle: "shared" }), pv("elsewhere")];
  const got = volumesOfSidecar({ driver: DRV, nodeId: "n1" }, sources(pvs, { volumesInUse: [`kubernetes.io/csi/${DRV}^shared`] }));
  assert.deepEqual(
    got.map((p) => p.name),
    ["new", "ns-2"],
  );
});

test("a volumesInUse entry without the driver^handle form is ignored", () => {
  const got = volumesOfSidecar(
    { driver: DRV, nodeId: "n1" },
    sources([pv("odd", { handle: `${DRV}x` })], { volumesInUse: [`kubernetes.io/csi/${DRV}x`, `kubernetes.io/csi/^${DRV}x`] }),
  );
  assert.deepEqual(got, []);
});

test("restart decision: handled → nothing; no marker yet → IF_ABNORMAL; a new marker → ALWAYS", () => {
  const ann = { "sidecar.csiaddons.openshift.io/createdByPodUID": "pod-1", "sidecar.csiaddons.openshift.io/driverRestartedAt": "2026-01-01T00:00:00Z" };
  const marker = restartMarker(ann);
  assert.equal(marker, "pod-1+2026-01-01T00:00:00Z");
  assert.deepEqual(decideRestart({ annotations: ann, deleting: false }), { trigger: "first-sight", mode: "IF_ABNORMAL", marker });
  assert.equal(decideRestart({ annotations: { ...ann, [HANDLED_RESTART]: marker }, deleting: false }), undefined);
  assert.deepEqual(decideRestart({ annotations: { ...ann, [HANDLED_RESTART]: "pod-1+" }, deleting: false }), { trigger: "restart", mode: "ALWAYS", marker });
  assert.deepEqual(
    decideRestart({ annotations: { ...ann, "sidecar.csiaddons.openshift.io/createdByPodUID": "pod-2", [HANDLED_RESTART]: marker }, deleting: false })?.mode,
    "ALWAYS",
  );
  assert.equal(decideRestart({ annotations: { ...ann, [HANDLED_RESTART]: "old" }, deleting: true }), undefined, "never for a sidecar being deleted");
});

test("restart time: driverRestartedAt when the same pod's driver restarted, else when first seen", () => {
  const at = "2026-01-01T00:00:00.000Z";
  const t = Date.parse(at);
  const ann = { "sidecar.csiaddons.openshift.io/createdByPodUID": "pod-1", "sidecar.csiaddons.openshift.io/driverRestartedAt": at };
  assert.equal(restartTime(ann, "pod-1+", t + 5000), t);
  assert.equal(restartTime(ann, "pod-0+", t + 5000), t + 5000, "a new pod: the old pod's driverRestartedAt says nothing");
  assert.equal(restartTime(ann, "pod-1+", t - 1), t - 1, "a timestamp from the future (clock skew) is not trusted");
});

test("capabilities: ALWAYS needs HEAL_VOLUME; IF_ABNORMAL needs GET_VOLUME_HEALTH too", () => {
  assert.equal(canRun("ALWAYS", { healVolume: true, getVolumeHealth: false }), true);
  assert.equal(canRun("IF_ABNORMAL", { healVolume: true, getVolumeHealth: false }), false);
  assert.equal(canRun("IF_ABNORMAL", { healVolume: true, getVolumeHealth: true }), true);
  assert.equal(canRun("ALWAYS", { healVolume: false, getVolumeHealth: true }), false);
});

test("retry classes: transient statuses are retried; refusals and bad requests are not", () => {
  for (const c of [status.UNAVAILABLE, status.RESOURCE_EXHAUSTED, status.ABORTED, status.DEADLINE_EXCEEDED]) assert.equal(isRetryable(c), true, status[c]);
  for (const c of [
    status.INVALID_ARGUMENT,
    status.NOT_FOUND,
    status.FAILED_PRECONDITION,
    status.UNIMPLEMENTED,
    status.PERMISSION_DENIED,
    status.UNAUTHENTICATED,
    status.INTERNAL,
  ]) {
    assert.equal(isRetryable(c), false, status[c]);
  }
});

test("backoff doubles from the initial delay to the cap, with jitter in [d/2, d]", () => {
  assert.deepEqual(
    [1, 2, 3, 4, 8, 20].map((a) => backoffMs(a, 500, 30_000, () => 1)),
    [500, 1000, 2000, 4000, 30_000, 30_000],
  );
  assert.deepEqual(
    [1, 2, 8].map((a) => backoffMs(a, 500, 30_000, () => 0)),
    [250, 500, 15_000],
  );
  assert.equal(
    jittered(300_000, () => 0),
    270_000,
  );
  assert.equal(
    jittered(300_000, () => 1),
    330_000,
  );
});

// node/presence and node/owner in process: what readiness says about the CSIAddonsNode as the API
// confirms it, loses it or stays silent, and whose name and ownerReference the object takes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Presence, type Condition } from "../../../../sidecar/node/presence.js";
import { resolvePodOwner, sameOwner, type PodOwner } from "../../../../sidecar/node/owner.js";
import type { KubeApi, ObjectMeta } from "../../../../sidecar/kube/api.js";
import { waitFor } from "../../../support/wait.js";
import { RecreationPacer } from "../../../../sidecar/node/recreation-pacer.js";
import { RefusalTally } from "../../../../sidecar/server/refusal-tally.js";

function presence(boundMs = 60_000) {
  const p = new Presence(() => "csi/node-1-csi", boundMs);
  const changes: Condition[] = [];
  p.on("change", (c) => void changes.push(c));
  return { p, changes };
}

test("presence: missing for one reason is told once; another reason is told, while 'not ready since' stays at the first", (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  const { p, changes } = presence();
  p.confirmed();
  const since = p.condition.since;
  t.mock.timers.tick(5);
  p.missing("deleted");
  p.missing("deleted");
  assert.deepEqual(
    changes.map((c) => [c.ok, c.reason]),
    [
      [true, changes[0]!.reason],
      [false, "CSIAddonsNode csi/node-1-csi missing (deleted)"],
    ],
  );
  const lost = changes[1]!.since;
  assert.equal(lost.getTime(), since.getTime() + 5, "a new 'since' when readiness went");
  t.mock.timers.tick(5);
  p.missing("not found");
  assert.equal(changes.length, 3);
  assert.equal(changes[2]!.reason, "CSIAddonsNode csi/node-1-csi missing (not found)");
  assert.equal(changes[2]!.since.getTime(), lost.getTime(), "still not ready since the deletion");
  p.close();
});

test("presence: silence past the bound ends readiness; closed, it tells nothing more", async () => {
  const { p, changes } = presence(200);
  p.confirmed();
  assert.equal(p.condition.ok, true);
  await waitFor("the bound to pass without a confirmation", () => changes.length === 2);
  assert.equal(changes[1]!.ok, false);
  assert.match(changes[1]!.reason, /not confirmed by the API within 0.2s \(last confirmed at /);
  p.close();
  p.confirmed();
  assert.equal(changes.length, 2, "nothing after close");
  assert.equal(p.condition.ok, false);
});

test("presence: known to be missing, it stays missing when the bound passes: the bound's lapse does not hide why", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 1_000_000 });
  const { p, changes } = presence(200);
  p.confirmed();
  p.missing("deleted");
  t.mock.timers.tick(1_000);
  assert.deepEqual(
    changes.map((c) => c.ok),
    [true, false],
  );
  assert.equal(p.condition.reason, "CSIAddonsNode csi/node-1-csi missing (deleted)");
  p.close();
});

test("presence: an API error is told while not ready, once per distinct error, and not while ready", () => {
  const { p, changes } = presence();
  p.failed("500 InternalError: boom");
  p.failed("500 InternalError: boom");
  assert.equal(changes.length, 1);
  assert.match(changes[0]!.reason, /not confirmed by the API yet; last API error: 500 InternalError: boom$/);
  p.confirmed();
  p.failed("503 ServiceUnavailable: later");
  assert.equal(changes.length, 2, "ready stays ready: the bound decides");
  assert.doesNotMatch(p.condition.reason, /last API error/);
  p.close();
});

const meta = (m: ObjectMeta) => ({ metadata: m });
function kubeOf(objects: { pods: Record<string, ObjectMeta>; replicaSets?: Record<string, ObjectMeta> }): KubeApi {
  return {
    getPod: async (_ns: string, name: string) => meta(objects.pods[name]!),
    getReplicaSet: async (_ns: string, name: string) => meta(objects.replicaSets![name]!),
  } as unknown as KubeApi;
}
const ctl = (kind: string, name: string, uid: string) => ({ apiVersion: "apps/v1", kind, name, uid, controller: true });

test("owner: a DaemonSet's pod names the DaemonSet and is owned by it", async () => {
  const kube = kubeOf({
    pods: { p: { uid: "pod-uid", ownerReferences: [{ ...ctl("DaemonSet", "plugin", "ds-uid"), controller: false }, ctl("DaemonSet", "plugin", "ds-uid")] } },
  });
  assert.deepEqual(await resolvePodOwner(kube, "csi", "p", AbortSignal.timeout(1000)), {
    kind: "DaemonSet",
    name: "plugin",
    ownerReference: { apiVersion: "apps/v1", kind: "DaemonSet", name: "plugin", uid: "ds-uid" },
    podUid: "pod-uid",
  });
});

test("owner: a Deployment's pod names the Deployment (not its ReplicaSet, which every rollout changes) and is owned by the Pod", async () => {
  // A Deployment that only refers to the ReplicaSet (it does not control it) does not name it.
  const kube = kubeOf({
    pods: { p: { uid: "pod-uid", ownerReferences: [ctl("ReplicaSet", "ctrl-7d9f", "rs-uid")] } },
    replicaSets: { "ctrl-7d9f": { ownerReferences: [{ ...ctl("Deployment", "old-ctrl", "o-uid"), controller: false }, ctl("Deployment", "ctrl", "dep-uid")] } },
  });
  assert.deepEqual(await resolvePodOwner(kube, "csi", "p", AbortSignal.timeout(1000)), {
    kind: "Deployment",
    name: "ctrl",
    ownerReference: { apiVersion: "v1", kind: "Pod", name: "p", uid: "pod-uid" },
    podUid: "pod-uid",
  });
  const orphanRs = kubeOf({ pods: { p: { uid: "pod-uid", ownerReferences: [ctl("ReplicaSet", "rs", "rs-uid")] } }, replicaSets: { rs: {} } });
  assert.equal((await resolvePodOwner(orphanRs, "csi", "p", AbortSignal.timeout(1000))).kind, "ReplicaSet");
  const bare = kubeOf({ pods: { p: { uid: "pod-uid" } } });
  assert.deepEqual(await resolvePodOwner(bare, "csi", "p", AbortSignal.timeout(1000)), {
    kind: "Pod",
    name: "p",
    ownerReference: { apiVersion: "v1", kind: "Pod", name: "p", uid: "pod-uid" },
    podUid: "pod-uid",
  });
});

test("owner: the same owner is the same kind, name and uid; one made again under the same name is another", () => {
  const o = (kind: string, name: string, uid: string): PodOwner => ({ kind, name, ownerReference: { apiVersion: "apps/v1", kind, name, uid }, podUid: "p" });
  assert.equal(sameOwner(o("DaemonSet", "a", "1"), o("DaemonSet", "a", "1")), true);
  assert.equal(sameOwner(o("DaemonSet", "a", "1"), o("DaemonSet", "a", "2")), false);
  assert.equal(sameOwner(o("DaemonSet", "a", "1"), o("DaemonSet", "b", "1")), false);
  assert.equal(sameOwner(o("DaemonSet", "a", "1"), o("StatefulSet", "a", "1")), false);
});

test("recreation pacer: the first deletion at once, then doubling waits up to the cap; an object that stood long enough ends the streak", () => {
  const pacer = new RecreationPacer({ firstMs: 1_000, capMs: 5_000, survivedMs: 60_000 });
  const waits = [10, 10, 10, 10, 10, 10].map((stood) => pacer.deleted(stood).waitMs);
  assert.deepEqual(waits, [0, 1_000, 2_000, 4_000, 5_000, 5_000]);
  assert.deepEqual(pacer.deleted(59_999), { waitMs: 5_000, inARow: 7 }, "stood a little less than the bound: still in the streak");
  assert.deepEqual(pacer.deleted(60_000), { waitMs: 0, inARow: 1 }, "stood the bound: a deletion like the first");
  assert.equal(pacer.deleted(0).waitMs, 1_000);
});

test("refusal tally: counts by reason with the latest detail (cut at 200 characters), and starts anew once taken", () => {
  const tally = new RefusalTally();
  assert.equal(tally.take(), undefined);
  tally.record("permission_denied", "first");
  tally.record("permission_denied", "user x may not call csiaddonsnodes");
  tally.record("tls_handshake", "y".repeat(300));
  assert.equal(tally.take(), `permission_denied ×2 (last: user x may not call csiaddonsnodes); tls_handshake ×1 (last: ${"y".repeat(200)}…)`);
  assert.equal(tally.take(), undefined);
});

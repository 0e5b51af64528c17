// The controller's narrow KubeWrites (kube/client.ts) against the in-memory API server with real
// API semantics: the handled marker merged into a CSIAddonsNode's annotations and nothing else,
// a sidecar's pod IP, the Event it writes and bumps, and the Lease with its optimistic
// concurrency. Errors are KubeRequestError with the API server's status.
import { after, before, test } from "node:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import assert from "node:assert/strict";
import { createKubeWrites, loadKubeConfig, COMPONENT } from "../../../../controller/kube/client.js";
import { KubeRequestError, type KubeWrites } from "../../../../controller/kube/api.js";
import { startKubeApi, type KubeApi } from "../../../kube/server.js";
import { csiNode, G, V, upstreamCrdFile } from "../../../kube/testkit.js";
import { tempDir } from "../../../support/proc.js";

let api: KubeApi;
let kube: KubeWrites;
const signal = () => AbortSignal.timeout(5_000);
const MARKER = "healer.csiaddons.openshift.io/handledRestart";

before(async () => {
  api = await startKubeApi({ crdFiles: [upstreamCrdFile] });
  kube = createKubeWrites(loadKubeConfig(api.kubeconfigPath));
});

after(async () => {
  await api?.stop();
});

const failsWith = (status: number, what: RegExp) => (err: unknown) => err instanceof KubeRequestError && err.status === status && what.test(err.message);

test("the handled marker is merged into the CSIAddonsNode's annotations: the sidecar's own annotations and the spec are left as they are", async () => {
  const obj = csiNode("node-1-csi", "default");
  obj["metadata"].annotations = { "sidecar.csiaddons.openshift.io/createdByPodUID": "pod-1" };
  await api.create(obj);
  await kube.patchCSIAddonsNodeAnnotation("default", "node-1-csi", MARKER, "pod-1+", signal());
  const stored = api.get(`${G}/${V}`, "CSIAddonsNode", "default", "node-1-csi") as { metadata: { annotations: Record<string, string> }; spec: unknown };
  assert.deepEqual(stored.metadata.annotations, { "sidecar.csiaddons.openshift.io/createdByPodUID": "pod-1", [MARKER]: "pod-1+" });
  assert.deepEqual(stored.spec, obj["spec"]);
  await assert.rejects(
    kube.patchCSIAddonsNodeAnnotation("default", "gone", MARKER, "x", signal()),
    failsWith(404, /patch CSIAddonsNode default\/gone: HTTP 404/),
  );
});

test("a sidecar's pod: what verifies it (uid, node, ServiceAccount, owners) and its IP; one not scheduled yet has none; one that does not exist is a 404", async () => {
  const owner = { apiVersion: "apps/v1", kind: "DaemonSet", name: "plugin", uid: "ds-uid", controller: true };
  const pod = (name: string, spec: object, status?: object) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", ownerReferences: [owner] },
    spec: { containers: [{ name: "c", image: "i" }], ...spec },
    ...(status ? { status } : {}),
  });
  await api.create(pod("plugin-a", { nodeName: "node-1", serviceAccountName: "plugin-sa" }, { phase: "Running", podIP: "10.1.2.3" }));
  await api.create(pod("plugin-b", {}));
  const a = await kube.sidecarPod("default", "plugin-a", signal());
  assert.deepEqual(
    { ...a, uid: a.uid.length > 0 },
    {
      uid: true,
      nodeName: "node-1",
      ip: "10.1.2.3",
      serviceAccount: "plugin-sa",
      owners: [{ kind: "DaemonSet", name: "plugin", uid: "ds-uid", controller: true }],
    },
  );
  const b = await kube.sidecarPod("default", "plugin-b", signal());
  assert.deepEqual([b.nodeName, b.ip, b.serviceAccount], ["", undefined, "default"]);
  await assert.rejects(kube.sidecarPod("default", "plugin-c", signal()), failsWith(404, /get Pod default\/plugin-c/));
});

test("an Event names the object, our component and its first and last time; a bump sets its count", async () => {
  await api.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "apps" } });
  const claim = { kind: "PersistentVolumeClaim", apiVersion: "v1", namespace: "apps", name: "data-0", uid: "claim-0" } as const;
  const name = await kube.createEvent(
    "apps",
    { involved: claim, type: "Warning", reason: "VolumeHealFailed", message: "by drv on node n1: UNAVAILABLE" },
    signal(),
  );
  assert.match(name, /^data-0\./);
  const ev = api.get("v1", "Event", "apps", name) as Record<string, any>;
  assert.deepEqual(ev["involvedObject"], { kind: "PersistentVolumeClaim", apiVersion: "v1", name: "data-0", namespace: "apps", uid: "claim-0" });
  assert.deepEqual([ev["type"], ev["reason"], ev["message"], ev["count"]], ["Warning", "VolumeHealFailed", "by drv on node n1: UNAVAILABLE", 1]);
  assert.deepEqual([ev["source"]?.component, ev["reportingComponent"]], [COMPONENT, COMPONENT]);
  assert.ok(Date.parse(ev["firstTimestamp"]) > 0 && ev["lastTimestamp"] === ev["firstTimestamp"]);
  await kube.bumpEvent("apps", name, 3, signal());
  const bumped = api.get("v1", "Event", "apps", name) as Record<string, any>;
  assert.equal(bumped["count"], 3);
  assert.ok(Date.parse(bumped["lastTimestamp"]) >= Date.parse(ev["firstTimestamp"]));
  assert.equal(bumped["reason"], "VolumeHealFailed", "a bump changes the count and time only");
});

test("the Lease: none yet; created; replaced at the resourceVersion read; a stale resourceVersion or a second create loses (409 → false)", async () => {
  assert.equal(await kube.readLease("default", "healer", signal()), undefined);
  const lease = {
    holder: "replica-a",
    renewTimeMs: Date.parse("2026-12-03T05:00:00.123Z"),
    acquireTimeMs: Date.parse("2026-12-03T04:59:00.456Z"),
    durationMs: 15_000,
    transitions: 0,
  };
  assert.equal(await kube.writeLease("default", "healer", lease, undefined, signal()), true);
  const read = await kube.readLease("default", "healer", signal());
  assert.ok(read?.resourceVersion);
  assert.deepEqual({ ...read, resourceVersion: "" }, { ...lease, resourceVersion: "" }, "times kept to the millisecond (MicroTime)");
  assert.equal(await kube.writeLease("default", "healer", { ...lease, holder: "replica-b" }, undefined, signal()), false, "created by someone else first");
  const renewed = { ...lease, renewTimeMs: lease.renewTimeMs + 2_000 };
  assert.equal(await kube.writeLease("default", "healer", renewed, read.resourceVersion, signal()), true);
  assert.equal(
    await kube.writeLease("default", "healer", { ...lease, holder: "replica-b", transitions: 1 }, read.resourceVersion, signal()),
    false,
    "a write from a stale read",
  );
  assert.equal((await kube.readLease("default", "healer", signal()))?.holder, "replica-a");
  await assert.rejects(kube.readLease("default", "healer", AbortSignal.abort()), failsWith(0, /get Lease default\/healer/));
});

test("the Lease's edges: a sub-second duration is written as 1 s (the API refuses 0), a refused write throws (only a 409 is a lost race), a Lease another writer left bare reads as zeros", async () => {
  const lease = {
    holder: "replica-a",
    renewTimeMs: Date.parse("2026-12-03T05:00:00Z"),
    acquireTimeMs: Date.parse("2026-12-03T05:00:00Z"),
    durationMs: 200,
    transitions: 0,
  };
  assert.equal(await kube.writeLease("default", "short", lease, undefined, signal()), true);
  const stored = api.get("coordination.k8s.io/v1", "Lease", "default", "short") as { spec: { leaseDurationSeconds: number } };
  assert.equal(stored.spec.leaseDurationSeconds, 1);

  api.faults.failNext(1, 500, { resource: "leases" });
  await assert.rejects(kube.writeLease("default", "refused", lease, undefined, signal()), failsWith(500, /write Lease default\/refused/));

  await api.create({
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: "bare", namespace: "default" },
    spec: { holderIdentity: "other" },
  });
  const bare = await kube.readLease("default", "bare", signal());
  assert.deepEqual({ ...bare, resourceVersion: "" }, { holder: "other", renewTimeMs: 0, acquireTimeMs: 0, durationMs: 0, transitions: 0, resourceVersion: "" });
});

test("an Event that cannot be sent is a KubeRequestError with status 0 (no HTTP answer): the API unreachable, or connection settings client-node refuses", async () => {
  const dir = tempDir();
  const config = (cluster: Record<string, unknown>, user: Record<string, unknown> = { token: "t" }) => {
    const path = join(dir, `kc-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(
      path,
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "c", cluster }],
        users: [{ name: "u", user }],
        contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
        "current-context": "x",
      }),
    );
    return createKubeWrites(loadKubeConfig(path));
  };
  const event = {
    involved: { kind: "PersistentVolume", apiVersion: "v1", namespace: undefined, name: "pv-1", uid: "u1" },
    type: "Normal",
    reason: "VolumeHealed",
    message: "m",
  } as const;
  await assert.rejects(
    config({ server: "https://127.0.0.1:1", "insecure-skip-tls-verify": true }).createEvent("default", event, signal()),
    failsWith(0, /ECONNREFUSED/),
  );
  // client-node refuses to send a token over plain HTTP unless told to skip TLS verification.
  await assert.rejects(config({ server: "http://127.0.0.1:1" }).createEvent("default", event, signal()), failsWith(0, /HTTP protocol is not allowed/));
});

import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { getEventListeners } from "node:events";
import { isDnsSubdomain, kubeletRootOf, publishTargetPath, stagingPath, volumeAttachmentName, volumeInUseName } from "../../../../sidecar/relay/names.js";
import { volumeCapability } from "../../../../sidecar/relay/capability.js";
import { Limiter } from "../../../../sidecar/relay/limiter.js";
import { SingleFlight } from "../../../../sidecar/util/single-flight.js";
import { csiAddonsNodeName } from "../../../../sidecar/node/name.js";
import { DomainError, deadlineExceeded } from "../../../../sidecar/errors.js";
import { VolumeCapability_AccessMode_Mode as Mode } from "../../../../proto/gen/csi/v1/csi.js";
import type { KubeApi, PersistentVolume } from "../../../../sidecar/kube/api.js";

const hex = (s: string) => createHash("sha256").update(s).digest("hex");

test("PV names: DNS-1123 subdomains only", () => {
  for (const ok of ["pv-1", "pvc-0a1b.x", "a"]) assert.ok(isDnsSubdomain(ok), ok);
  for (const bad of ["", "PV", "-a", "a-", "../etc", "a/b", "a".repeat(254), "é", "a..b"]) assert.ok(!isDnsSubdomain(bad), bad);
});

test("VolumeAttachment name, staging paths and volumesInUse as the kubelet computes them", () => {
  assert.equal(volumeAttachmentName("vol-1", "d.example.com", "node-1"), `csi-${hex("vol-1d.example.comnode-1")}`);
  assert.equal(
    stagingPath("/var/lib/kubelet/plugins/kubernetes.io/csi/", "pv-1", "d", "vol-1", false),
    `/var/lib/kubelet/plugins/kubernetes.io/csi/d/${hex("vol-1")}/globalmount`,
  );
  assert.equal(stagingPath("/k/csi", "pv-1", "d", "vol-1", true), "/k/csi/volumeDevices/staging/pv-1");
  assert.equal(volumeInUseName("d", "vol-1"), "kubernetes.io/csi/d^vol-1");
});

test("publish target paths as the kubelet lays them out (csi_mounter.go getTargetPath + GetCSIMounterPath, csi_block.go getPublishPath), under the root the staging path implies", () => {
  const uid = "0b7ac1f2-5c3e-4f7a-9d2e-3a4b5c6d7e8f";
  assert.equal(kubeletRootOf("/var/lib/kubelet/plugins/kubernetes.io/csi/"), "/var/lib/kubelet");
  assert.equal(kubeletRootOf("/data/kubelet/plugins/kubernetes.io/csi"), "/data/kubelet");
  assert.equal(kubeletRootOf("/plugins/kubernetes.io/csi"), "/");
  for (const other of ["/env/staging/", "/var/lib/kubelet/plugins/", "/var/lib/kubelet/plugins/kubernetes.io/csi/extra"])
    assert.equal(kubeletRootOf(other), undefined, other);
  assert.equal(publishTargetPath("/var/lib/kubelet", "pv-1", uid, false), `/var/lib/kubelet/pods/${uid}/volumes/kubernetes.io~csi/pv-1/mount`);
  assert.equal(publishTargetPath("/var/lib/kubelet", "pv-1", uid, true), `/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pv-1/${uid}`);
  // Block: beside the staging path the sidecar already sends.
  assert.equal(
    stagingPath("/var/lib/kubelet/plugins/kubernetes.io/csi/", "pv-1", "d", "vol-1", true),
    "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pv-1",
  );
  // Nothing but a PV name and a UUID becomes part of a path.
  for (const [pv, u] of [
    ["../x", uid],
    ["pv-1", "../../etc"],
    ["pv-1", "not-a-uuid"],
    ["PV", uid],
  ] as const) {
    assert.throws(() => publishTargetPath("/var/lib/kubelet", pv, u, false), /no publish path/, `${pv} ${u}`);
  }
});

test("VolumeCapability from the PV", () => {
  const pv = (spec: Partial<PersistentVolume["spec"]>): PersistentVolume => ({
    metadata: {},
    spec: { csi: { driver: "d", volumeHandle: "h", fsType: "xfs" }, ...spec },
  });
  assert.deepEqual(volumeCapability(pv({ accessModes: ["ReadWriteOnce"], mountOptions: ["noatime"] })), {
    accessType: { $case: "mount", mount: { fsType: "xfs", mountFlags: ["noatime"], volumeMountGroup: "" } },
    accessMode: { mode: Mode.SINGLE_NODE_MULTI_WRITER },
  });
  assert.deepEqual(volumeCapability(pv({ volumeMode: "Block", accessModes: ["ReadWriteMany"] })), {
    accessType: { $case: "block", block: {} },
    accessMode: { mode: Mode.MULTI_NODE_MULTI_WRITER },
  });
  assert.equal(volumeCapability(pv({ accessModes: ["ReadWriteOncePod"] })).accessMode?.mode, Mode.SINGLE_NODE_SINGLE_WRITER);
  assert.equal(volumeCapability(pv({ accessModes: ["ReadOnlyMany"] })).accessMode?.mode, Mode.MULTI_NODE_READER_ONLY);
});

test("VolumeCapability of a PV with several access modes: the first, as the kubelet stages it; none is ReadWriteOnce, the kubelet's default", () => {
  const pv = (accessModes?: string[]): PersistentVolume => ({
    metadata: {},
    spec: { csi: { driver: "d", volumeHandle: "h" }, ...(accessModes ? { accessModes } : {}) },
  });
  assert.equal(
    volumeCapability(pv(["ReadOnlyMany", "ReadWriteOnce"])).accessMode?.mode,
    Mode.MULTI_NODE_READER_ONLY,
    "staged read-only: never re-staged writable",
  );
  assert.equal(volumeCapability(pv(["ReadWriteOnce", "ReadWriteMany"])).accessMode?.mode, Mode.SINGLE_NODE_MULTI_WRITER);
  assert.equal(volumeCapability(pv(["ReadWriteOncePod", "ReadWriteMany"])).accessMode?.mode, Mode.SINGLE_NODE_SINGLE_WRITER);
  assert.equal(volumeCapability(pv([])).accessMode?.mode, Mode.SINGLE_NODE_MULTI_WRITER);
  assert.equal(volumeCapability(pv()).accessMode?.mode, Mode.SINGLE_NODE_MULTI_WRITER);
});

test("CSIAddonsNode name, hashed past 253 characters", () => {
  assert.equal(csiAddonsNodeName("node-1", "csi", "DaemonSet", "plugin"), "node-1-csi-daemonset-plugin");
  const long = csiAddonsNodeName("n".repeat(200), "csi", "DaemonSet", "p".repeat(100));
  assert.equal(long.length, 251);
  assert.equal(long.slice(0, 234), `${"n".repeat(200)}-csi-daemonset-${"p".repeat(100)}`.slice(0, 234));
  assert.equal(long.slice(235), hex("n".repeat(200) + "csi" + "daemonset" + "p".repeat(100)).slice(0, 16));
});

test("CSIAddonsNode long name: the upstream sidecar's own test case (Test_generateName, 'long names') names the same object", () => {
  // The expected hash is computed outside this code (sha256sum of nodeID+namespace+"deployment"+ownerName);
  // hashing "Deployment" before lowercasing gives dd3dedc53a92568b instead.
  const nodeId = `a-very-long-node-id-that-exceeds-the-limit-of-253-characters-and-should-trigger-uuid-generation-${"1234567890".repeat(14)}`;
  const owner = `another-long-owner-name-that-is-definitely-more-than-253-characters-long-${"1234567890".repeat(14)}`;
  const name = csiAddonsNodeName(nodeId, "test-namespace", "Deployment", owner);
  assert.equal(name, `${`${nodeId}-test-namespace-deployment-${owner}`.slice(0, 234)}-3b290eae20540ae1`);
});

test("Limiter: at most max at once, bounded queue, RESOURCE_EXHAUSTED beyond, cancelled waiters leave", async () => {
  const l = new Limiter(2, 1);
  const gates: (() => void)[] = [];
  const job = () => new Promise<void>((r) => gates.push(r));
  const never = new AbortController().signal;
  const a = l.run(job, never);
  const b = l.run(job, never);
  const c = l.run(job, never);
  await assert.rejects(l.run(job, never), (e: DomainError) => e.kind === "ResourceExhausted");
  assert.equal(l.inflight, 2);
  assert.equal(gates.length, 2);
  gates[0]!();
  await a;
  await new Promise((r) => setImmediate(r));
  assert.equal(gates.length, 3, "the queued job runs when a slot frees");
  gates[1]!();
  gates[2]!();
  await Promise.all([b, c]);
  // a waiter that gives up is removed from the queue
  const hold1 = l.run(job, never);
  const hold2 = l.run(job, never);
  const ac = new AbortController();
  const waiting = l.run(job, ac.signal);
  ac.abort();
  await assert.rejects(waiting, (e: DomainError) => e.kind === "Cancelled");
  const next = l.run(job, never); // the queue slot is free again
  gates[3]!();
  gates[4]!();
  await Promise.all([hold1, hold2]);
  await new Promise((r) => setImmediate(r));
  gates[5]!();
  await next;
});

test("Limiter: a waiter granted a slot leaves no listener on its caller's signal (a long-lived signal would collect one per queued call)", async () => {
  const l = new Limiter(1, 4);
  let open!: () => void;
  const first = l.run(() => new Promise<void>((r) => (open = r)), new AbortController().signal);
  const caller = new AbortController();
  const queued = l.run(async () => {}, caller.signal);
  assert.equal(getEventListeners(caller.signal, "abort").length, 1, "listening while it waits");
  await new Promise((r) => setImmediate(r)); // the first job has started
  open();
  await Promise.all([first, queued]);
  assert.equal(getEventListeners(caller.signal, "abort").length, 0);
});

test("SingleFlight: identical concurrent calls share one execution; the shared work is cancelled only when all callers left", async () => {
  const sf = new SingleFlight<number>();
  let runs = 0;
  let release!: (v: number) => void;
  let sharedSignal!: AbortSignal;
  const fn = (signal: AbortSignal) => {
    runs++;
    sharedSignal = signal;
    return new Promise<number>((r) => (release = r));
  };
  const c1 = new AbortController();
  const c2 = new AbortController();
  const p1 = sf.do("k", c1.signal, fn);
  const p2 = sf.do("k", c2.signal, fn);
  assert.equal(runs, 1);
  c1.abort();
  // The words the sidecar's "call failed" line gives a caller that left.
  await assert.rejects(p1, (e: DomainError) => e.kind === "Cancelled" && e.message === "call cancelled");
  assert.equal(sharedSignal.aborted, false, "one caller left, the other still waits");
  release(7);
  assert.equal(await p2, 7);
  assert.equal(sf.size, 0);
  const c3 = new AbortController();
  const p3 = sf.do("k", c3.signal, fn);
  c3.abort();
  await assert.rejects(p3);
  assert.equal(sharedSignal.aborted, true, "the last caller leaving cancels the work");
  const before = runs;
  await assert.rejects(sf.do("k", AbortSignal.abort(), fn), (e: DomainError) => e.kind === "Cancelled");
  assert.equal(runs, before, "a caller already gone starts no work");
  assert.equal(sf.size, 0);
});

test("SingleFlight: once every caller has left, the next identical call runs anew instead of joining the cancelled work; a failure nobody waits for is not an unhandled rejection", async () => {
  const sf = new SingleFlight<number>();
  const runs: AbortSignal[] = [];
  const fails: ((e: Error) => void)[] = [];
  const fn = (signal: AbortSignal) => {
    runs.push(signal);
    return new Promise<number>((resolve, reject) => {
      fails.push(reject);
      signal.addEventListener("abort", () => setImmediate(() => resolve(-1)), { once: true });
      setTimeout(() => resolve(runs.length), 10);
    });
  };
  const gone = new AbortController();
  const first = sf.do("k", gone.signal, fn);
  gone.abort();
  await assert.rejects(first, (e: DomainError) => e.kind === "Cancelled");
  assert.equal(sf.size, 0, "the cancelled flight is forgotten at once");
  assert.equal(await sf.do("k", new AbortController().signal, fn), 2, "a second execution, not the cancelled one's answer");

  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on("unhandledRejection", onUnhandled);
  try {
    // A caller already cancelled when it arrives: the work starts and is cancelled, and nobody awaits it.
    const p = sf.do("j", AbortSignal.abort(), () => new Promise<number>((_resolve, reject) => fails.push(reject)));
    await assert.rejects(p);
    fails.at(-1)!(new Error("driver failed after every caller left"));
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(unhandled, []);
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
});

test("SecretCache: the stage secrets of several storage classes are each read once within the TTL, with a deadline of their own", async () => {
  const { SecretCache } = await import("../../../../sidecar/relay/secret-cache.js");
  const reads: string[] = [];
  const kube = {
    getSecretData: async (namespace: string, name: string, signal: AbortSignal) => {
      assert.equal(signal.aborted, false);
      reads.push(`${namespace}/${name}`);
      return { userKey: `key-of-${name}` };
    },
  } as unknown as KubeApi;
  const secrets = new SecretCache(kube, 60_000);
  for (const name of ["rbd-a", "rbd-b", "cephfs", "rbd-a", "rbd-b", "cephfs"])
    assert.deepEqual(await secrets.get("ceph-csi", name), { userKey: `key-of-${name}` });
  assert.deepEqual(reads, ["ceph-csi/rbd-a", "ceph-csi/rbd-b", "ceph-csi/cephfs"]);
});

test("TtlCache: shared loads, expiry, bounded size, failures not kept", async () => {
  const { TtlCache } = await import("../../../../sidecar/util/ttl-cache.js");
  const c = new TtlCache<number>(60_000, 2);
  let loads = 0;
  const load = (v: number) => () => (loads++, Promise.resolve(v));
  assert.equal(await Promise.all([c.get("a", load(1)), c.get("a", load(9))]).then((r) => r.join()), "1,1");
  assert.equal(loads, 1, "concurrent lookups share one load");
  await c.get("b", load(2));
  await c.get("c", load(3)); // evicts "a", the oldest
  assert.equal(await c.get("a", load(4)), 4);
  await assert.rejects(c.get("x", () => Promise.reject(new Error("boom"))));
  assert.equal(await c.get("x", load(5)), 5, "a failed load is not kept");
  const expired = new TtlCache<number>(0, 10);
  await expired.get("k", load(6));
  assert.equal(await expired.get("k", load(7)), 7, "an expired entry is loaded again");
});

test("TtlCache: a caller that gives up leaves the shared load to the others; the load is cancelled, and forgotten, once every caller has left", async () => {
  const { TtlCache } = await import("../../../../sidecar/util/ttl-cache.js");
  const c = new TtlCache<string>(60_000, 10);
  const loads: { signal: AbortSignal; resolve: (v: string) => void }[] = [];
  const load = (signal: AbortSignal) =>
    new Promise<string>((resolve, reject) => {
      loads.push({ signal, resolve });
      signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
  const [a, b] = [new AbortController(), new AbortController()];
  const first = c.get("k", load, a.signal);
  const second = c.get("k", load, b.signal);
  a.abort(new Error("first caller cancelled"));
  await assert.rejects(first, { name: "CancelledError" }, "the caller that left is answered at once, as cancelled");
  assert.equal(loads.length, 1, "one shared load");
  assert.equal(loads[0]!.signal.aborted, false, "still wanted by the second caller");
  loads[0]!.resolve("v");
  assert.equal(await second, "v");
  assert.equal(await c.get("k", load, AbortSignal.abort()).catch(() => "refused"), "refused", "an already-cancelled caller starts nothing");
  // A caller whose deadline has passed is told so, from a cached key as from a load (SingleFlight's rule).
  const late = AbortSignal.abort(deadlineExceeded("deadline passed before the PV was read"));
  for (const key of ["k", "not-cached"]) await assert.rejects(c.get(key, load, late), { name: "DeadlineExceededError" }, key);
  assert.equal(loads.length, 1, "and starts nothing");
  assert.equal(await c.get("k", load), "v", "the value is kept");

  const [x, y] = [new AbortController(), new AbortController()];
  const both = [c.get("j", load, x.signal), c.get("j", load, y.signal)];
  x.abort(new Error("x left"));
  y.abort(new Error("y left"));
  await Promise.allSettled(both);
  assert.equal(loads[1]!.signal.aborted, true, "nobody wants it any more");
  const again = c.get("j", load);
  assert.equal(loads.length, 3, "the next lookup loads afresh instead of joining the cancelled load");
  loads[2]!.resolve("w");
  assert.equal(await again, "w");

  // A caller without a signal never leaves: the load goes on for it.
  const z = new AbortController();
  const mixed = [c.get("m", load), c.get("m", load, z.signal)];
  z.abort(new Error("z left"));
  await assert.rejects(mixed[1]!);
  assert.equal(loads[3]!.signal.aborted, false);
  loads[3]!.resolve("m");
  assert.equal(await mixed[0], "m");
});

test("TtlCache: a value the cache is told not to keep (an absent Secret) is looked up again", async () => {
  const { TtlCache } = await import("../../../../sidecar/util/ttl-cache.js");
  const c = new TtlCache<string | undefined>(60_000, 10, (v) => v !== undefined);
  let loads = 0;
  const found = [undefined, undefined, "now there"];
  const load = () => Promise.resolve(found[loads++]);
  assert.deepEqual(await Promise.all([c.get("s", load), c.get("s", load)]), [undefined, undefined], "concurrent lookups still share it");
  assert.equal(loads, 1);
  assert.equal(await c.get("s", load), undefined);
  assert.equal(await c.get("s", load), "now there");
  assert.equal(await c.get("s", load), "now there", "a found value is kept");
  assert.equal(loads, 3);
});

test("TtlCache: an entry loaded again after it expired counts as the newest when the oldest must go", async (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  const { TtlCache } = await import("../../../../sidecar/util/ttl-cache.js");
  const c = new TtlCache<string>(150, 3);
  const loads: string[] = [];
  const load = (k: string) => () => (loads.push(k), Promise.resolve(k));
  await c.get("a", load("a"));
  t.mock.timers.tick(150); // a expired
  await c.get("b", load("b"));
  await c.get("a", load("a")); // loaded again: now newer than b
  await c.get("c", load("c"));
  await c.get("d", load("d")); // full: b, the oldest, goes
  await c.get("a", load("a"));
  assert.deepEqual(loads, ["a", "b", "a", "c", "d"], "a still cached");
});

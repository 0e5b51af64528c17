// The healing relay end to end — the test is the healer controller over TCP, the
// driver-stub and the sidecar are real processes, Kubernetes is the in-memory API.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { call, codeName } from "../../support/grpc.js";
import { waitFor } from "../../support/wait.js";
import { DRIVER, NAMESPACE, pv, secret, volumeAttachment } from "../../support/fixtures.js";
import { secretDigest } from "../../../driver-stub/call-log.js";
import { HealVolumeRequest_Mode as Mode, type VolumeHealerClient } from "../../../proto/gen/sidecar/v1/healer.js";
import { NodeHealVolumeResponse_Result as Result, VolumeHealth_State as State } from "../../../proto/gen/healer/v1/healer.js";
import { reasonFor } from "../../support/heal-request.js";

const SECRET_VALUE = "s3cr3t-Value-never-logged-7f3a";
const STAGING = "/var/lib/kubelet/plugins/kubernetes.io/csi/";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

let kube: KubeApi;
let stub: DriverStub;
let sidecar: SidecarProc;
let client: InstanceType<typeof VolumeHealerClient>;

const health = (pvName: string, deadlineMs?: number) => call(client, client.getVolumeHealth, { pvName }, { deadlineMs });
const heal = (pvName: string, mode = Mode.ALWAYS, deadlineMs?: number) =>
  call(client, client.healVolume, { pvName, mode, reason: reasonFor(mode) }, { deadlineMs });

/** Driver calls (addons server) received for a volume, optionally of one method. */
const driverCalls = (volumeId?: string, method?: string) =>
  stub.calls({ server: "addons", method, volumeId }).filter((c) => !c.method.startsWith("/identity."));

describe("healing relay", () => {
  before(async () => {
    kube = await startTestKube(
      [
        secret(NAMESPACE, "stage-secret", { userID: "admin", userKey: SECRET_VALUE }),
        pv("pv-file", {
          handle: "vol-file",
          secret: { namespace: NAMESPACE, name: "stage-secret" },
          fsType: "xfs",
          mountOptions: ["discard"],
          accessModes: ["ReadWriteOnce"],
        }),
        volumeAttachment("pv-file", "vol-file", { metadata: { devicePath: "/dev/rbd0" } }),
        pv("pv-block", { handle: "vol-block", block: true, accessModes: ["ReadWriteMany"] }),
        volumeAttachment("pv-block", "vol-block"),
        pv("pv-noattach", { handle: "vol-na", accessModes: ["ReadWriteOncePod"] }),
        pv("pv-other-driver", { handle: "vol-other", driver: "other.csi.example.com" }),
        pv("pv-elsewhere", { handle: "vol-elsewhere" }),
        volumeAttachment("pv-elsewhere", "vol-elsewhere", { nodeName: "node-2" }),
        pv("pv-detached", { handle: "vol-detached" }),
        volumeAttachment("pv-detached", "vol-detached", { attached: false }),
        pv("pv-nosecret", { handle: "vol-nosecret", secret: { namespace: NAMESPACE, name: "missing-secret" } }),
        volumeAttachment("pv-nosecret", "vol-nosecret"),
        pv("pv-locked", { handle: "vol-locked" }),
        volumeAttachment("pv-locked", "vol-locked"),
        pv("pv-slow", { handle: "vol-slow" }),
        volumeAttachment("pv-slow", "vol-slow"),
        pv("pv-unstaged", { handle: "vol-unstaged" }),
        volumeAttachment("pv-unstaged", "vol-unstaged"),
        {
          apiVersion: "v1",
          kind: "PersistentVolume",
          metadata: { name: "pv-hostpath" },
          spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], hostPath: { path: "/tmp/x" } },
        },
        { ...pv("pv-deleting", { handle: "vol-deleting" }), metadata: { name: "pv-deleting", finalizers: ["kubernetes.io/pv-protection"] } },
        volumeAttachment("pv-deleting", "vol-deleting"),
      ],
      { volumesInUse: [`kubernetes.io/csi/${DRIVER}^vol-na`] },
    );
    kube.delete("v1", "PersistentVolume", undefined, "pv-deleting");
    const dir = tempDir();
    stub = await startDriverStub({
      dir,
      state: {
        volumes: {
          "vol-file": { state: "ABNORMAL", reason: "TransportEndpointNotConnected", message: "rbd-nbd died", heal: "SUCCEED" },
          "vol-block": { state: "HEALTHY" },
          "vol-na": { state: "HEALTHY" },
          "vol-nosecret": { state: "ABNORMAL" },
          "vol-locked": { state: "ABNORMAL", locked: true },
          "vol-slow": { state: "HEALTHY", delayMs: 5_000 },
          "vol-deleting": { state: "HEALTHY" },
          "vol-elsewhere": { state: "HEALTHY" },
          "vol-detached": { state: "HEALTHY" },
        },
      },
    });
    sidecar = await startSidecarProc({ driverSocket: join(dir, "addons.sock"), kubeconfig: kube.kubeconfigPath, args: ["--timeout=2s"] });
    await waitHealth(sidecar, "SERVING");
    client = sidecar.healer();
  });

  after(async () => {
    try {
      // The sidecar must never have dialled the driver's CSI socket.
      assert.deepEqual(stub.csiCalls(), [], "zero calls on the CSI socket");
    } finally {
      await sidecar?.stop();
      await stub?.stop();
      await kube?.stop();
    }
  });

  test("ABNORMAL → heal IF_ABNORMAL → HEALED → HEALTHY, with the kubelet's staging path, capability, publish context and secrets", async () => {
    const h1 = await health("pv-file");
    assert.ok(h1.ok, JSON.stringify(h1));
    assert.equal(h1.value.health?.state, State.ABNORMAL);
    assert.equal(h1.value.health?.reason, "TransportEndpointNotConnected");
    assert.equal(h1.value.volumeId, "vol-file");

    const r = await heal("pv-file", Mode.IF_ABNORMAL);
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.value.result, Result.HEALED);
    assert.equal(r.value.health?.state, State.HEALTHY);

    const h2 = await health("pv-file");
    assert.ok(h2.ok);
    assert.equal(h2.value.health?.state, State.HEALTHY);

    const [hc] = driverCalls("vol-file", "NodeGetVolumeHealth");
    assert.deepEqual(hc!.request, {
      volumeId: "vol-file",
      stagingTargetPath: `${STAGING}${DRIVER}/${sha("vol-file")}/globalmount`,
      volumeContext: { pool: "rbd" },
    });
    const [healCall] = driverCalls("vol-file", "NodeHealVolume");
    assert.deepEqual(healCall!.request, {
      volumeId: "vol-file",
      stagingTargetPath: `${STAGING}${DRIVER}/${sha("vol-file")}/globalmount`,
      volumeCapability: { mount: { fsType: "xfs", mountFlags: ["discard"] }, accessMode: { mode: "SINGLE_NODE_MULTI_WRITER" } },
      // The decoded values themselves reached the driver (the call log keeps only their digests).
      secrets: { userID: secretDigest("admin"), userKey: secretDigest(SECRET_VALUE) },
      volumeContext: { pool: "rbd" },
      publishContext: { devicePath: "/dev/rbd0" },
      // Asked IF_ABNORMAL: heal what the check found broken.
      reason: "VOLUME_ABNORMAL",
    });
  });

  test("a healthy volume → NOT_NEEDED without a heal call; block volumes get the block staging path and capability", async () => {
    const r = await heal("pv-block", Mode.IF_ABNORMAL);
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.value.result, Result.NOT_NEEDED);
    assert.equal(driverCalls("vol-block", "NodeHealVolume").length, 0);
    const a = await heal("pv-block", Mode.ALWAYS);
    assert.ok(a.ok);
    const [hv] = driverCalls("vol-block", "NodeHealVolume");
    assert.equal((hv!.request as any).stagingTargetPath, `${STAGING}volumeDevices/staging/pv-block`);
    assert.deepEqual((hv!.request as any).volumeCapability, { block: {}, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } });
  });

  test("a driver without attach: the Node's volumesInUse says the volume is here", async () => {
    const r = await health("pv-noattach");
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.value.health?.state, State.HEALTHY);
    const a = await heal("pv-noattach");
    assert.ok(a.ok, JSON.stringify(a));
    const [hv] = driverCalls("vol-na", "NodeHealVolume");
    assert.equal((hv!.request as any).volumeCapability.accessMode.mode, "SINGLE_NODE_SINGLE_WRITER");
    assert.deepEqual((hv!.request as any).publishContext ?? {}, {});
  });

  test("Kubernetes API cost: a repeated health check costs no read (watched PV cache, watched Node); a heal one (its VolumeAttachment, for publish_context)", async () => {
    await waitFor("the sidecar's PersistentVolume watch", () => kube.counters.get("watch", "persistentvolumes") >= 1);
    assert.ok((await health("pv-noattach")).ok);
    kube.counters.reset();
    assert.ok((await health("pv-noattach")).ok);
    assert.deepEqual(kube.counters.snapshot(), {});
    assert.ok((await heal("pv-block")).ok);
    kube.counters.reset();
    assert.ok((await heal("pv-block")).ok);
    assert.deepEqual(kube.counters.snapshot(), { "get volumeattachments": 1 });
    kube.counters.reset();
    assert.ok((await heal("pv-file")).ok);
    assert.ok((await heal("pv-file")).ok);
    assert.ok(kube.counters.get("get", "secrets") <= 1, "the stage secret is read at most once for back-to-back heals");
  });

  // Every error row of DESIGN 4.4: the code, a message naming the object, and whether the driver was called.
  const rows: { name: string; run: () => Promise<any>; code: grpc.status; message: RegExp; volume?: string; driverCalled: boolean }[] = [
    {
      name: "invalid PV name",
      run: () => heal("../../etc/passwd"),
      code: grpc.status.INVALID_ARGUMENT,
      message: /^pv_name "\.\.\/\.\.\/etc\/passwd" is not a valid PersistentVolume name \(DNS-1123 subdomain\)$/,
      driverCalled: false,
    },
    { name: "empty PV name", run: () => health(""), code: grpc.status.INVALID_ARGUMENT, message: /^pv_name "" is not a valid/, driverCalled: false },
    // A name past 64 characters is shown cut, so a hostile one cannot flood the answer or the log.
    {
      name: "overlong PV name",
      run: () => health("p".repeat(300)),
      code: grpc.status.INVALID_ARGUMENT,
      message: new RegExp(`^pv_name "${"p".repeat(64)}"\\.\\.\\. is not a valid`),
      driverCalled: false,
    },
    {
      name: "unknown heal mode",
      run: () => heal("pv-block", 7 as Mode),
      code: grpc.status.INVALID_ARGUMENT,
      message: /^mode 7 is not a HealVolume mode \(required: ALWAYS = 1 or IF_ABNORMAL = 2\)$/,
      volume: "vol-block",
      driverCalled: false,
    },
    {
      name: "heal without a mode",
      run: () => heal("pv-block", Mode.MODE_UNSPECIFIED),
      code: grpc.status.INVALID_ARGUMENT,
      message: /^mode 0 is not a HealVolume mode/,
      volume: "vol-block",
      driverCalled: false,
    },
    {
      name: "heal without a reason",
      run: () => call(client, client.healVolume, { pvName: "pv-block", mode: Mode.ALWAYS, reason: 0 }),
      code: grpc.status.INVALID_ARGUMENT,
      message: /^reason 0 is not a heal reason \(required: DRIVER_RESTARTED = 1, VOLUME_ABNORMAL = 2 or OPERATOR_REQUEST = 3\)$/,
      volume: "vol-block",
      driverCalled: false,
    },
    { name: "unknown PV", run: () => heal("pv-nope"), code: grpc.status.NOT_FOUND, message: /PersistentVolume pv-nope not found/, driverCalled: false },
    {
      name: "PV of another driver",
      run: () => heal("pv-other-driver"),
      code: grpc.status.FAILED_PRECONDITION,
      message: /belongs to driver other\.csi\.example\.com/,
      volume: "vol-other",
      driverCalled: false,
    },
    { name: "PV not CSI", run: () => heal("pv-hostpath"), code: grpc.status.FAILED_PRECONDITION, message: /not a CSI volume/, driverCalled: false },
    {
      name: "PV being deleted",
      run: () => heal("pv-deleting"),
      code: grpc.status.FAILED_PRECONDITION,
      message: /being deleted/,
      volume: "vol-deleting",
      driverCalled: false,
    },
    {
      name: "volume attached to another node",
      run: () => heal("pv-elsewhere"),
      code: grpc.status.FAILED_PRECONDITION,
      message: /not in use on node node-1/,
      volume: "vol-elsewhere",
      driverCalled: false,
    },
    {
      name: "VolumeAttachment not attached",
      run: () => health("pv-detached"),
      code: grpc.status.FAILED_PRECONDITION,
      message: /is not attached/,
      volume: "vol-detached",
      driverCalled: false,
    },
    {
      name: "missing stage secret",
      run: () => heal("pv-nosecret"),
      code: grpc.status.FAILED_PRECONDITION,
      message: /stage secret csi\/missing-secret of PersistentVolume pv-nosecret not found/,
      volume: "vol-nosecret",
      driverCalled: false,
    },
    {
      name: "driver ABORTED (volume locked) passes through",
      run: () => heal("pv-locked"),
      code: grpc.status.ABORTED,
      message: /./,
      volume: "vol-locked",
      driverCalled: true,
    },
    {
      name: "volume not staged on this node: driver NOT_FOUND passes through",
      run: () => health("pv-unstaged"),
      code: grpc.status.NOT_FOUND,
      message: /./,
      volume: "vol-unstaged",
      driverCalled: true,
    },
    {
      name: "deadline: --timeout bounds a slow driver",
      run: () => health("pv-slow"),
      code: grpc.status.DEADLINE_EXCEEDED,
      message: /./,
      volume: "vol-slow",
      driverCalled: true,
    },
  ];
  for (const row of rows) {
    test(`error row: ${row.name} → ${codeName(row.code)}`, async () => {
      const before = row.volume ? driverCalls(row.volume).length : 0;
      const r = await row.run();
      assert.equal(r.ok, false, JSON.stringify(r));
      assert.equal(codeName(r.code), codeName(row.code), r.details);
      assert.match(r.details, row.message);
      if (row.volume) {
        const after = await waitFor(
          "call log settled",
          () => (row.driverCalled ? driverCalls(row.volume).length > before && driverCalls(row.volume) : driverCalls(row.volume)),
          { timeoutMs: 10_000 },
        );
        assert.equal(after.length > before, row.driverCalled, `driver called: ${row.driverCalled}`);
      }
    });
  }

  test("the caller's shorter deadline wins over --timeout", async () => {
    const before = driverCalls("vol-slow").length;
    const r = await health("pv-slow", 500);
    assert.equal(r.ok, false);
    assert.equal(codeName((r as any).code), "DEADLINE_EXCEEDED");
    // What the driver was given, not how long the answer took (a busy machine stretches that): the
    // caller's 500 ms, less what the sidecar spent, never --timeout's 2 s.
    const call = await waitFor("the driver's call of vol-slow logged", () => driverCalls("vol-slow")[before]);
    assert.ok(
      call.deadline !== null && call.deadline - call.t0 <= 501,
      `the driver's deadline was ${String(call.deadline && call.deadline - call.t0)} ms away`,
    );
  });

  test("single flight keeps each caller's deadline: one that joins a call with a shorter deadline gets its answer after that one runs out, from a driver call of its own", async () => {
    stub.updateState((s) => ({ ...s, volumes: { ...s.volumes, "vol-slow": { state: "HEALTHY", delayMs: 800 } } }));
    try {
      // Earlier tests' slow calls may still be logged meanwhile: only calls made from now on count.
      const since = Date.now();
      const arrivedBefore = stub.arrived("NodeGetVolumeHealth", "vol-slow");
      const short = health("pv-slow", 400);
      await waitFor("the first call at the driver", () => stub.arrived("NodeGetVolumeHealth", "vol-slow") > arrivedBefore);
      const long = await health("pv-slow", 1_900);
      const first = await short;
      assert.equal(first.ok, false);
      assert.equal(codeName((first as any).code), "DEADLINE_EXCEEDED");
      assert.ok(long.ok, JSON.stringify(long));
      const calls = await waitFor("both driver calls logged", () => {
        const c = driverCalls("vol-slow", "NodeGetVolumeHealth").filter((e) => e.t0 >= since);
        return c.length >= 2 && c;
      });
      assert.equal(calls.length, 2, "the joined call, then one on the longer deadline: never two at once");
      assert.ok(calls[1]!.t0 >= calls[0]!.t1 - 5, "one after the other");
    } finally {
      stub.updateState((s) => ({ ...s, volumes: { ...s.volumes, "vol-slow": { state: "HEALTHY", delayMs: 5_000 } } }));
    }
  });

  test("driver without the capability → UNIMPLEMENTED, driver not called", async () => {
    stub.updateState((s) => ({ ...s, capabilities: { getVolumeHealth: true, healVolume: false } }));
    try {
      // Capabilities are read at (re)connection: restart the driver so the sidecar re-reads them.
      await stub.stop();
      stub = await startDriverStub({ ...stub.options, state: undefined });
      await waitFor("sidecar sees the driver without HEAL_VOLUME", async () => {
        const r = await heal("pv-block");
        return !r.ok && r.code === grpc.status.UNIMPLEMENTED ? r : undefined;
      });
      const n = driverCalls("vol-block", "NodeHealVolume").length;
      const r = await heal("pv-block");
      assert.equal((r as any).code, grpc.status.UNIMPLEMENTED);
      assert.match((r as any).details, /HEAL_VOLUME/);
      assert.equal(driverCalls("vol-block", "NodeHealVolume").length, n);
    } finally {
      stub.updateState((s) => ({ ...s, capabilities: { getVolumeHealth: true, healVolume: true } }));
      await stub.stop();
      stub = await startDriverStub({ ...stub.options, state: undefined });
      await waitHealth(sidecar, "SERVING");
    }
  });

  test("driver down → UNAVAILABLE; driver dying mid-call → UNAVAILABLE; every request answered", async () => {
    stub.updateState((s) => ({ ...s, volumes: { ...s.volumes, "vol-slow": { state: "HEALTHY", delayMs: 1_500 } } }));
    const before = stub.arrived("NodeGetVolumeHealth", "vol-slow");
    const inflight = health("pv-slow", 10_000);
    await waitFor("the slow call to reach the driver", () => stub.arrived("NodeGetVolumeHealth", "vol-slow") > before);
    await stub.kill();
    const r = await inflight;
    assert.equal(r.ok, false);
    assert.equal(codeName((r as any).code), "UNAVAILABLE");
    await waitHealth(sidecar, "NOT_SERVING");
    const down = await heal("pv-file");
    assert.equal(codeName((down as any).code), "UNAVAILABLE");
    stub = await startDriverStub({ ...stub.options, state: undefined });
    await waitHealth(sidecar, "SERVING");
  });

  // Makes its own calls, so it passes alone too; then checks the whole run's output so far.
  test("logs of the whole run: only JSON lines, request-scoped fields, no secret value anywhere", async () => {
    assert.ok((await heal("pv-file")).ok);
    assert.equal(codeName(((await heal("pv-nosecret")) as { code: grpc.status }).code), "FAILED_PRECONDITION");
    const lines = await waitFor("the log lines of both calls", () => {
      const all = sidecar.logLines();
      return all.some((l) => l.message === "call failed" && l.pv === "pv-nosecret") ? all : undefined;
    });
    // The whole run since the start is checked (parseLines throws on a line that is not JSON).
    for (const m of ["starting csi-addons-sidecar", "sidecar started", "driver ready"])
      assert.ok(
        lines.some((l) => l.message === m),
        m,
      );
    assert.equal(sidecar.proc.stderr(), "", "nothing on stderr (grpc-js is not logging there)");
    const served = lines.find((l) => l.message === "call served" && l.method === "/sidecar.v1.VolumeHealer/HealVolume" && l.pv === "pv-file");
    assert.ok(served, "one line per call with method and pv");
    assert.equal(served.volume_id, "vol-file");
    assert.equal(served.code, "OK");
    assert.equal(typeof served.duration, "number");
    const failed = lines.find((l) => l.message === "call failed" && l.pv === "pv-nosecret");
    assert.equal(failed?.code, "FAILED_PRECONDITION");
    const all = readFileSync(stub.callLogFile, "utf8") + stub.proc.stdout() + stub.proc.stderr() + sidecar.proc.stdout() + sidecar.proc.stderr();
    assert.ok(!all.includes(SECRET_VALUE), "no secret value in any log");
    assert.ok(!all.includes(Buffer.from(SECRET_VALUE).toString("base64")), "not even base64-encoded");
  });
});

// The call log and the receipt lines on stdout, read from a real driver-stub process.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { VolumeCapability_AccessMode_Mode as Mode } from "../../../proto/gen/csi/v1/csi.js";
import { secretDigest } from "../../../driver-stub/call-log.js";
import { waitFor } from "../../support/wait.js";
import { grpcError, STAGING_PATH, status, withStub } from "../../support/driver-stub-fixture.js";
import { HealReason, MountPropagation } from "../../../proto/gen/healer/v1/healer.js";

const SECRET = "s3cr3t-Value-9f1c";
const mount = {
  accessType: { $case: "mount" as const, mount: { fsType: "ext4", mountFlags: ["noatime"], volumeMountGroup: "" } },
  accessMode: { mode: Mode.SINGLE_NODE_MULTI_WRITER },
};

describe("driver-stub call log", () => {
  const fx = withStub();

  it("one line per call, written at the answer: receipt and answer times, deadline, method, request as proto JSON, status", async () => {
    fx.stub.setState({ volumes: { "vol-1": { state: "ABNORMAL", delayMs: 200 } } });
    const logged = fx.stub.calls().length;
    const before = Date.now();
    await fx.c.heal({
      volumeId: "vol-1",
      stagingTargetPath: STAGING_PATH,
      volumePath: "/pods/p/volumes/v",
      volumeCapability: mount,
      secrets: { userKey: SECRET },
      volumeContext: { pool: "rbd" },
      publishContext: { devicePath: "/dev/nbd0" },
      reason: HealReason.DRIVER_RESTARTED,
      targets: [
        { targetPath: "/pods/p/volumes/v", podNamespace: "n", podName: "p", podUid: "u", readonly: true, mountPropagation: MountPropagation.BIDIRECTIONAL },
      ],
    });
    const after = Date.now();
    const entries = fx.stub.calls().slice(logged);
    assert.equal(entries.length, 1);
    const e = entries[0]!;
    assert.deepEqual(Object.keys(e), ["time", "server", "method", "request", "t0", "t1", "deadline", "cancelled", "code"]);
    assert.equal(e.server, "addons");
    assert.equal(e.method, "/healer.v1.VolumeHealerNode/NodeHealVolume");
    assert.equal(e.code, "OK");
    assert.deepEqual(e.request, {
      volumeId: "vol-1",
      stagingTargetPath: STAGING_PATH,
      volumePath: "/pods/p/volumes/v",
      volumeCapability: { mount: { fsType: "ext4", mountFlags: ["noatime"] }, accessMode: { mode: "SINGLE_NODE_MULTI_WRITER" } },
      secrets: { userKey: secretDigest(SECRET) },
      volumeContext: { pool: "rbd" },
      publishContext: { devicePath: "/dev/nbd0" },
      reason: "DRIVER_RESTARTED",
      targets: [{ targetPath: "/pods/p/volumes/v", podNamespace: "n", podName: "p", podUid: "u", readonly: true, mountPropagation: "BIDIRECTIONAL" }],
    });
    assert.equal(e.cancelled, null, "answered, not cancelled");
    // The client's deadline was 10 s from `before` (clients.ts); the stub saw it through grpc-timeout.
    assert.ok(e.deadline !== null && Math.abs(e.deadline - (before + 10_000)) < 1_000, `deadline ${e.deadline} ≈ ${before + 10_000}`);
    assert.match(e.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(Date.parse(e.time), Math.floor(e.t0), "time is the receipt time");
    // 5 ms: the stub's performance clock and this process's Date.now() agree only to about a millisecond.
    assert.ok(before - 5 <= e.t0 && e.t1 <= after + 5, `t0 ${e.t0} and t1 ${e.t1} lie within the call [${before}, ${after}]`);
    assert.ok(e.t1 - e.t0 >= 195, `t1 - t0 = ${e.t1 - e.t0} covers the 200 ms delay`);
  });

  it("prints a receipt line on stdout while the call is in flight; the log line comes with the answer", async () => {
    fx.stub.setState({ volumes: { "vol-2": { delayMs: 60_000 } } });
    const logged = fx.stub.calls().length;
    const seen = fx.stub.proc.stdout().length;
    const pending = fx.c.health.start({ volumeId: "vol-2" });
    await waitFor("the receipt line", () => fx.stub.proc.stdout().slice(seen).includes("recv /healer.v1.VolumeHealerNode/NodeGetVolumeHealth vol-2\n"));
    assert.equal(fx.stub.calls().length, logged, "no log line before the answer");
    const cancelledAt = Date.now();
    pending.call.cancel();
    await assert.rejects(pending.response, grpcError(status.CANCELLED));
    await waitFor("the log line of the cancelled call", () => fx.stub.calls().length === logged + 1);
    const [e] = fx.stub.calls().slice(logged);
    assert.equal(e!.code, "CANCELLED");
    assert.ok(e!.cancelled !== null && e!.cancelled >= cancelledAt - 5, `cancellation recorded at ${e!.cancelled}, after ${cancelledAt}`);
    assert.ok(e!.cancelled < e!.deadline!, "cancelled well before its deadline");
  });

  it("a call whose deadline passes in the driver is logged DEADLINE_EXCEEDED at that deadline", async () => {
    fx.stub.setState({ volumes: { "vol-d": { delayMs: 60_000 } } });
    const logged = fx.stub.calls().length;
    await assert.rejects(fx.c.health({ volumeId: "vol-d" }, 300), grpcError(status.DEADLINE_EXCEEDED));
    const e = await waitFor("the log line", () => fx.stub.calls().slice(logged)[0]);
    assert.equal(e.code, "DEADLINE_EXCEEDED");
    assert.ok(e.deadline !== null && e.deadline - e.t0 <= 300 && e.deadline - e.t0 > 150, `deadline ${e.deadline! - e.t0} ms after receipt`);
    assert.ok(e.cancelled !== null && Math.abs(e.cancelled - e.deadline) < 200, `ended ${e.cancelled! - e.deadline} ms from its deadline`);
  });

  it("logs every failure with its gRPC status name", async () => {
    fx.stub.setState({ volumes: { locked: { locked: true } } });
    const logged = fx.stub.calls().length;
    await assert.rejects(fx.c.health({ volumeId: "missing" }), grpcError(status.NOT_FOUND));
    await assert.rejects(fx.c.heal({ volumeId: "locked" }), grpcError(status.INVALID_ARGUMENT));
    await assert.rejects(fx.c.heal({ volumeId: "locked", stagingTargetPath: STAGING_PATH }), grpcError(status.ABORTED));
    assert.deepEqual(
      fx.stub
        .calls()
        .slice(logged)
        .map((e) => e.code),
      ["NOT_FOUND", "INVALID_ARGUMENT", "ABORTED"],
    );
  });

  it('records every CSI call with server "csi", secrets of NodeStage redacted with their keys kept', async () => {
    fx.stub.setState({});
    const logged = fx.stub.calls().length;
    await fx.c.getPluginInfo();
    await fx.c.getPluginCapabilities();
    await fx.c.csiProbe();
    await fx.c.stage({
      volumeId: "vol-3",
      stagingTargetPath: STAGING_PATH,
      volumeCapability: mount,
      secrets: { adminId: "admin", adminKey: SECRET },
    });
    await fx.c.unstage({ volumeId: "vol-3", stagingTargetPath: STAGING_PATH });
    await fx.c.nodeGetCapabilities();
    await fx.c.nodeGetInfo();
    await assert.rejects(fx.c.stage({ volumeId: "vol-3", stagingTargetPath: STAGING_PATH }), grpcError(status.INVALID_ARGUMENT));
    await fx.c.probe();
    const entries = fx.stub.calls().slice(logged);
    assert.deepEqual(
      entries.map((e) => `${e.server} ${e.method} ${e.code}`),
      [
        "csi /csi.v1.Identity/GetPluginInfo OK",
        "csi /csi.v1.Identity/GetPluginCapabilities OK",
        "csi /csi.v1.Identity/Probe OK",
        "csi /csi.v1.Node/NodeStageVolume OK",
        "csi /csi.v1.Node/NodeUnstageVolume OK",
        "csi /csi.v1.Node/NodeGetCapabilities OK",
        "csi /csi.v1.Node/NodeGetInfo OK",
        "csi /csi.v1.Node/NodeStageVolume INVALID_ARGUMENT",
        "addons /identity.Identity/Probe OK",
      ],
    );
    assert.deepEqual((entries[3]!.request as { secrets: unknown }).secrets, { adminId: secretDigest("admin"), adminKey: secretDigest(SECRET) });
    assert.deepEqual(fx.stub.csiCalls().slice(-8), entries.slice(0, 8));
  });

  it("never writes a secret value to the call log, stdout or stderr", async () => {
    fx.stub.setState({ volumes: { "vol-s": { state: "ABNORMAL" } } });
    await fx.c.heal({ volumeId: "vol-s", stagingTargetPath: STAGING_PATH, secrets: { userKey: SECRET } });
    await fx.c.stage({ volumeId: "vol-s2", stagingTargetPath: STAGING_PATH, volumeCapability: mount, secrets: { adminKey: SECRET } });
    assert.ok(fx.stub.calls({ method: "NodeHealVolume" }).some((e) => JSON.stringify(e).includes(`"userKey":"${secretDigest(SECRET)}"`)));
    assert.ok(!readFileSync(fx.stub.callLogFile, "utf8").includes(SECRET), "call log");
    assert.ok(!fx.stub.proc.stdout().includes(SECRET), "stdout");
    assert.ok(!fx.stub.proc.stderr().includes(SECRET), "stderr");
  });

  it("keeps one whole line per call under concurrency", async () => {
    fx.stub.setState({ volumes: { a: {}, b: { state: "ABNORMAL" } } });
    const logged = fx.stub.calls().length;
    await Promise.all(Array.from({ length: 40 }, (_, i) => fx.c.health({ volumeId: i % 2 ? "a" : "b" })));
    const entries = fx.stub.calls().slice(logged);
    assert.equal(entries.length, 40);
    assert.equal(entries.filter((e) => (e.request as { volumeId: string }).volumeId === "a").length, 20);
  });
});

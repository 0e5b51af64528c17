// NodeHealVolume outcomes, the per-volume lock it shares with NodeStage/NodeUnstage, and delays that
// end with their call, against a real driver-stub process.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { VolumeCapability_AccessMode_Mode as Mode } from "../../../proto/gen/csi/v1/csi.js";
import {
  HealReason,
  MountPropagation as Propagation,
  NodeHealVolumeResponse_Result as Result,
  TargetResult_State as Target,
  VolumeHealth_State as State,
} from "../../../proto/gen/healer/v1/healer.js";
import { waitFor } from "../../support/wait.js";
import { grpcError, STAGING_PATH, status, withStub, type StubFixture } from "../../support/driver-stub-fixture.js";

const healOf = (volumeId: string) => ({ volumeId, stagingTargetPath: STAGING_PATH });
const stageOf = (volumeId: string) => ({
  volumeId,
  stagingTargetPath: STAGING_PATH,
  volumeCapability: { accessType: { $case: "block" as const, block: {} }, accessMode: { mode: Mode.SINGLE_NODE_WRITER } },
});

/** Starts a heal and waits until the stub printed its receipt (it holds the lock from then on). */
async function healInFlight(fx: StubFixture, volumeId: string, deadlineMs = 30_000) {
  const seen = fx.stub.proc.stdout().length;
  const pending = fx.c.heal.start(healOf(volumeId), deadlineMs);
  pending.response.catch(() => {}); // awaited (or deliberately abandoned) by the test
  await waitFor(`heal of ${volumeId} in flight`, () =>
    fx.stub.proc.stdout().slice(seen).includes(`recv /healer.v1.VolumeHealerNode/NodeHealVolume ${volumeId}\n`),
  );
  return pending;
}

describe("driver-stub NodeHealVolume reasons and targets", () => {
  const fx = withStub();
  const target = (name: string, mountPropagation = Propagation.NONE) => ({
    targetPath: `/var/lib/kubelet/pods/${name}/volumes/kubernetes.io~csi/pv/mount`,
    podNamespace: "apps",
    podName: name,
    podUid: name,
    readonly: false,
    mountPropagation,
  });
  const states = (res: { targets: { targetPath: string; state: Target; reason: string }[] }) =>
    res.targets.map((t) => [t.targetPath.split("/")[5], Target[t.state], t.reason]);

  it("a heal without a reason, or with one the contract does not know, is INVALID_ARGUMENT; so is a target without a path", async () => {
    fx.stub.setState({ volumes: { v: {} } });
    for (const reason of [HealReason.HEAL_REASON_UNSPECIFIED, 9 as HealReason]) {
      await assert.rejects(fx.c.heal({ ...healOf("v"), reason }), { code: status.INVALID_ARGUMENT, details: /^reason is required/ });
    }
    await assert.rejects(fx.c.heal({ ...healOf("v"), targets: [{ ...target("a"), targetPath: "" }] }), {
      code: status.INVALID_ARGUMENT,
      details: "targets[0].target_path is required",
    });
  });

  it("DRIVER_RESTARTED and OPERATOR_REQUEST make the data path again even of a HEALTHY volume, each time (idempotent); VOLUME_ABNORMAL leaves it", async () => {
    fx.stub.setState({ volumes: { v: {} } });
    for (const reason of [HealReason.DRIVER_RESTARTED, HealReason.DRIVER_RESTARTED, HealReason.OPERATOR_REQUEST]) {
      const res = await fx.c.heal({ ...healOf("v"), reason });
      assert.deepEqual([res.result, res.message], [Result.HEALED, "data path re-established"], HealReason[reason]);
    }
    assert.equal((await fx.c.heal({ ...healOf("v"), reason: HealReason.VOLUME_ABNORMAL })).result, Result.NOT_NEEDED);
  });

  it("re-attach data path: every pod whole in place; FUSE-like: only pods with HostToContainer or Bidirectional, the others to be restarted until they go; a target not published is NOT_MOUNTED", async () => {
    const published = ["a", "b", "c", "d"].map((n) => target(n).targetPath);
    fx.stub.setState({ volumes: { block: { dataPath: "reattach" }, fuse: { dataPath: "fuse", state: "ABNORMAL", published } } });
    const targets = [
      target("a"),
      target("b", Propagation.HOST_TO_CONTAINER),
      target("c", Propagation.BIDIRECTIONAL),
      target("d", Propagation.MOUNT_PROPAGATION_UNSPECIFIED),
      target("e"),
    ];
    const reattached = await fx.c.heal({ ...healOf("block"), reason: HealReason.DRIVER_RESTARTED, targets });
    assert.deepEqual(
      states(reattached),
      ["a", "b", "c", "d", "e"].map((n) => [n, "WHOLE_IN_PLACE", "DeviceReattached"]),
    );

    const fuse = await fx.c.heal({ ...healOf("fuse"), reason: HealReason.VOLUME_ABNORMAL, targets });
    assert.equal(fuse.result, Result.HEALED);
    assert.deepEqual(states(fuse), [
      ["a", "RESTART_NEEDED", "StaleFuseMount"],
      ["b", "WHOLE_IN_PLACE", "MountPropagated"],
      ["c", "WHOLE_IN_PLACE", "MountPropagated"],
      ["d", "RESTART_NEEDED", "StaleFuseMount"],
      ["e", "NOT_MOUNTED", "NotPublished"],
    ]);
    // Healthy now, nothing to heal: pod a still sees the dead mount; pod b is fine.
    const after = await fx.c.heal({ ...healOf("fuse"), reason: HealReason.VOLUME_ABNORMAL, targets: [target("a"), target("b")] });
    assert.equal(after.result, Result.NOT_NEEDED);
    assert.deepEqual(states(after), [
      ["a", "RESTART_NEEDED", "StaleFuseMount"],
      ["b", "WHOLE_IN_PLACE", "NothingToHeal"],
    ]);
  });
});

describe("driver-stub NodeHealVolume outcomes", () => {
  const fx = withStub();

  it("heal SUCCEED: ABNORMAL becomes HEALTHY, is written back to the state file, and a second heal is NOT_NEEDED", async () => {
    fx.stub.setState({
      volumes: {
        v: { state: "ABNORMAL", reason: "TransportEndpointNotConnected", message: "dead", heal: "SUCCEED" },
        other: { state: "ABNORMAL" },
      },
    });
    const healed = await fx.c.heal(healOf("v"));
    assert.equal(healed.result, Result.HEALED);
    assert.deepEqual(healed.health, { state: State.HEALTHY, reason: "", message: "" });
    assert.deepEqual(fx.stub.readState(), {
      volumes: { v: { state: "HEALTHY", heal: "SUCCEED" }, other: { state: "ABNORMAL" } },
    });
    assert.equal((await fx.c.health({ volumeId: "v" })).health?.state, State.HEALTHY);
    const again = await fx.c.heal(healOf("v"));
    assert.equal(again.result, Result.NOT_NEEDED, "idempotent");
    assert.equal(again.health?.state, State.HEALTHY);
  });

  it("heal FAIL answers INTERNAL and leaves the volume ABNORMAL", async () => {
    fx.stub.setState({ volumes: { v: { state: "ABNORMAL", heal: "FAIL" } } });
    await assert.rejects(fx.c.heal(healOf("v")), grpcError(status.INTERNAL));
    assert.equal(fx.stub.readState().volumes?.v?.state, "ABNORMAL");
  });

  it("heal NOT_HEALABLE answers result NOT_HEALABLE with the unchanged health", async () => {
    fx.stub.setState({ volumes: { v: { state: "ABNORMAL", reason: "ImageGone", heal: "NOT_HEALABLE" } } });
    const res = await fx.c.heal(healOf("v"));
    assert.equal(res.result, Result.NOT_HEALABLE);
    assert.deepEqual(res.health, { state: State.ABNORMAL, reason: "ImageGone", message: "" });
    assert.equal(fx.stub.readState().volumes?.v?.state, "ABNORMAL");
  });

  it("a HEALTHY volume is NOT_NEEDED whatever its heal outcome", async () => {
    fx.stub.setState({ volumes: { v: { state: "HEALTHY", heal: "FAIL" } } });
    assert.equal((await fx.c.heal(healOf("v"))).result, Result.NOT_NEEDED);
  });

  it("an UNSUPPORTED volume is NOT_HEALABLE even when its heal would succeed", async () => {
    fx.stub.setState({ volumes: { v: { state: "UNSUPPORTED", heal: "SUCCEED" } } });
    const res = await fx.c.heal(healOf("v"));
    assert.equal(res.result, Result.NOT_HEALABLE);
    assert.equal(res.health?.state, State.UNSUPPORTED);
    assert.equal(fx.stub.readState().volumes?.v?.state, "UNSUPPORTED");
  });
});

describe("driver-stub per-volume lock", () => {
  const fx = withStub();

  it("locked: true answers ABORTED to NodeHealVolume, NodeStage and NodeUnstage; health still answers", async () => {
    fx.stub.setState({ volumes: { v: { state: "ABNORMAL", locked: true }, w: { state: "ABNORMAL" } } });
    await assert.rejects(fx.c.heal(healOf("v")), grpcError(status.ABORTED));
    await assert.rejects(fx.c.stage(stageOf("v")), grpcError(status.ABORTED));
    await assert.rejects(fx.c.unstage(healOf("v")), grpcError(status.ABORTED));
    assert.equal((await fx.c.health({ volumeId: "v" })).health?.state, State.ABNORMAL);
    assert.equal(fx.stub.readState().volumes?.v?.state, "ABNORMAL", "not healed behind the lock");
    assert.equal((await fx.c.heal(healOf("w"))).result, Result.HEALED, "other volumes are not locked");
    fx.stub.updateState((s) => void (s.volumes!.v!.locked = false));
    assert.equal((await fx.c.heal(healOf("v"))).result, Result.HEALED, "unlocked by the state file");
  });

  it("NodeStage and NodeUnstage without volume_id, staging_target_path or (NodeStage) volume_capability: INVALID_ARGUMENT naming it", async () => {
    fx.stub.setState({ volumes: { v: {} } });
    const refused = (field: string) => (err: { code?: number; details?: string }) =>
      err.code === status.INVALID_ARGUMENT && err.details === `${field} is required`;
    await assert.rejects(fx.c.stage({ ...stageOf("v"), volumeId: "" }), refused("volume_id"));
    await assert.rejects(fx.c.stage({ ...stageOf("v"), stagingTargetPath: "" }), refused("staging_target_path"));
    await assert.rejects(fx.c.stage({ ...stageOf("v"), volumeCapability: undefined }), refused("volume_capability"));
    await assert.rejects(fx.c.unstage({ ...healOf("v"), volumeId: "" }), refused("volume_id"));
    await assert.rejects(fx.c.unstage({ ...healOf("v"), stagingTargetPath: "" }), refused("staging_target_path"));
    await fx.c.stage(stageOf("v"));
    await fx.c.unstage(healOf("v"));
  });

  it("a heal in flight holds the lock: concurrent NodeStage, NodeUnstage and NodeHealVolume are ABORTED", async () => {
    fx.stub.setState({ volumes: { v: { state: "ABNORMAL", delayMs: 60_000 }, w: {} } });
    const first = await healInFlight(fx, "v");
    await assert.rejects(fx.c.stage(stageOf("v")), grpcError(status.ABORTED));
    await assert.rejects(fx.c.unstage(healOf("v")), grpcError(status.ABORTED));
    fx.stub.updateState((s) => void (s.volumes!.v!.delayMs = 0));
    await assert.rejects(fx.c.heal(healOf("v")), grpcError(status.ABORTED), "a second heal of the same volume");
    await fx.c.stage(stageOf("w"));
    // Health never waits on the lock (it must answer even when an operation is stuck on a dead mount).
    assert.equal((await fx.c.health({ volumeId: "v" })).health?.state, State.ABNORMAL);
    first.call.cancel();
    await assert.rejects(first.response, grpcError(status.CANCELLED));
    await waitFor("the lock released by the cancelled heal", async () => {
      await fx.c.stage(stageOf("v"));
      return true;
    });
    await fx.c.unstage(healOf("v"));
  });
});

describe("driver-stub delayMs", () => {
  const fx = withStub();

  it("delays NodeGetVolumeHealth and NodeHealVolume by delayMs", async () => {
    fx.stub.setState({ volumes: { v: { state: "ABNORMAL", delayMs: 400 } } });
    for (const call of [() => fx.c.health({ volumeId: "v" }), () => fx.c.heal(healOf("v"))]) {
      const t0 = performance.now();
      await call();
      const elapsed = performance.now() - t0;
      assert.ok(elapsed >= 395, `answered after ${elapsed.toFixed(0)} ms, before the 400 ms delay`);
    }
    assert.equal(fx.stub.readState().volumes?.v?.state, "HEALTHY");
  });

  it("a heal past its deadline ends at the deadline: DEADLINE_EXCEEDED, nothing healed, lock released", async () => {
    fx.stub.setState({ volumes: { v: { state: "ABNORMAL", delayMs: 60_000 } } });
    const logged = fx.stub.calls().length;
    const pending = await healInFlight(fx, "v", 500);
    await assert.rejects(pending.response, grpcError(status.DEADLINE_EXCEEDED));
    const entry = await waitFor("the expired heal in the call log", () => fx.stub.calls().slice(logged)[0], { timeoutMs: 5_000 });
    assert.equal(entry.method, "/healer.v1.VolumeHealerNode/NodeHealVolume");
    assert.equal(entry.code, "DEADLINE_EXCEEDED");
    assert.ok(entry.t1 - entry.t0 < 5_000, `delay ended ${entry.t1 - entry.t0} ms after receipt, not at the deadline`);
    assert.equal(fx.stub.readState().volumes?.v?.state, "ABNORMAL", "the dead call did not heal afterwards");
    fx.stub.updateState((s) => void (s.volumes!.v!.delayMs = 0));
    assert.equal((await fx.c.heal(healOf("v"))).result, Result.HEALED, "the volume's lock was released");
  });

  it("a health check the client cancels ends at once and is logged CANCELLED", async () => {
    fx.stub.setState({ volumes: { v: { delayMs: 60_000 } } });
    const logged = fx.stub.calls().length;
    const seen = fx.stub.proc.stdout().length;
    const pending = fx.c.health.start({ volumeId: "v" });
    await waitFor("health in flight", () => fx.stub.proc.stdout().slice(seen).includes("NodeGetVolumeHealth v\n"));
    pending.call.cancel();
    await assert.rejects(pending.response, grpcError(status.CANCELLED));
    const entry = await waitFor("the cancelled call in the call log", () => fx.stub.calls().slice(logged)[0], { timeoutMs: 5_000 });
    assert.equal(entry.method, "/healer.v1.VolumeHealerNode/NodeGetVolumeHealth");
    assert.equal(entry.code, "CANCELLED");
    assert.ok(entry.t1 - entry.t0 < 5_000);
    assert.match(fx.stub.proc.stdout().slice(seen), /^gone \/healer\.v1\.VolumeHealerNode\/NodeGetVolumeHealth v CANCELLED$/m);
  });

  it("stdout: one `recv` line per call, naming the volume when the request has one; no `gone` line for a call answered", async () => {
    fx.stub.setState({ volumes: { v: {} } });
    const seen = fx.stub.proc.stdout().length;
    await fx.c.health({ volumeId: "v" });
    await fx.c.probe();
    await fx.c.getIdentity();
    // grpc-js reports a stream closed after its answer as "cancelled" too, which is no cancellation:
    // one more call gives those events a round trip to show up as a `gone` line if they did.
    await fx.c.probe();
    const lines = fx.stub.proc.stdout().slice(seen).split("\n").filter(Boolean);
    assert.deepEqual(lines.slice(0, 3), [
      "recv /healer.v1.VolumeHealerNode/NodeGetVolumeHealth v",
      "recv /identity.Identity/Probe",
      "recv /identity.Identity/GetIdentity",
    ]);
    assert.ok(!lines.some((l) => l.startsWith("gone ")), lines.join("\n"));
  });
});

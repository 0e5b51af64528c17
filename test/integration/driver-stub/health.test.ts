// NodeGetVolumeHealth and the checks NodeGetVolumeHealth and NodeHealVolume share, against a real
// driver-stub process whose state file each test rewrites.
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { describe, it } from "node:test";
import { VolumeHealth_State as State } from "../../../proto/gen/healer/v1/healer.js";
import { waitFor } from "../../support/wait.js";
import { grpcError, STAGING_PATH, status, withStub } from "../../support/driver-stub-fixture.js";

describe("driver-stub NodeGetVolumeHealth", () => {
  const fx = withStub();

  it("reports each volume's state, reason and message from the state file", async () => {
    fx.stub.setState({
      volumes: {
        ok: {},
        dead: { state: "ABNORMAL", reason: "TransportEndpointNotConnected", message: "rbd-nbd is gone" },
        odd: { state: "UNSUPPORTED", reason: "NoHealthCheck" },
      },
    });
    assert.deepEqual(await fx.c.health({ volumeId: "ok" }), { health: { state: State.HEALTHY, reason: "", message: "" } });
    assert.deepEqual(await fx.c.health({ volumeId: "dead", stagingTargetPath: STAGING_PATH }), {
      health: { state: State.ABNORMAL, reason: "TransportEndpointNotConnected", message: "rbd-nbd is gone" },
    });
    assert.deepEqual(await fx.c.health({ volumeId: "odd" }), { health: { state: State.UNSUPPORTED, reason: "NoHealthCheck", message: "" } });
  });

  it("picks up a changed state file without a restart", async () => {
    fx.stub.setState({ volumes: { v: { state: "ABNORMAL" } } });
    assert.equal((await fx.c.health({ volumeId: "v" })).health?.state, State.ABNORMAL);
    fx.stub.setState({ volumes: { v: { state: "HEALTHY" } } });
    assert.equal((await fx.c.health({ volumeId: "v" })).health?.state, State.HEALTHY);
  });

  it("NOT_FOUND for a volume the state file does not list, and with no state file at all", async () => {
    fx.stub.setState({ volumes: { v: {} } });
    await assert.rejects(fx.c.health({ volumeId: "elsewhere" }), grpcError(status.NOT_FOUND));
    await assert.rejects(fx.c.heal({ volumeId: "elsewhere", stagingTargetPath: STAGING_PATH }), grpcError(status.NOT_FOUND));
    fx.stub.setState({});
    await assert.rejects(fx.c.health({ volumeId: "v" }), grpcError(status.NOT_FOUND));
  });

  it("INVALID_ARGUMENT without volume_id, and for heal without staging_target_path, even for unknown volumes", async () => {
    fx.stub.setState({ volumes: { v: { state: "ABNORMAL" } } });
    await assert.rejects(fx.c.health({ volumeId: "" }), { code: status.INVALID_ARGUMENT, details: /volume_id/ });
    await assert.rejects(fx.c.heal({ stagingTargetPath: STAGING_PATH }), { code: status.INVALID_ARGUMENT, details: /volume_id/ });
    await assert.rejects(fx.c.heal({ volumeId: "v" }), { code: status.INVALID_ARGUMENT, details: /staging_target_path/ });
    await assert.rejects(fx.c.heal({ volumeId: "unknown" }), { code: status.INVALID_ARGUMENT, details: /staging_target_path/ });
    assert.equal(fx.stub.readState().volumes?.v?.state, "ABNORMAL", "nothing healed");
  });

  it("FAILED_PRECONDITION from both healer calls while the driver is not ready", async () => {
    fx.stub.setState({ ready: false, volumes: { v: { state: "ABNORMAL" } } });
    await assert.rejects(fx.c.health({ volumeId: "v" }), grpcError(status.FAILED_PRECONDITION));
    await assert.rejects(fx.c.heal({ volumeId: "v", stagingTargetPath: STAGING_PATH }), grpcError(status.FAILED_PRECONDITION));
    assert.equal(fx.stub.readState().volumes?.v?.state, "ABNORMAL", "nothing healed");
    fx.stub.updateState((s) => ({ ...s, ready: true }));
    assert.equal((await fx.c.health({ volumeId: "v" })).health?.state, State.ABNORMAL);
  });

  it("UNIMPLEMENTED for a healer call whose capability the state file switched off", async () => {
    fx.stub.setState({ capabilities: { getVolumeHealth: false }, volumes: { v: { state: "ABNORMAL" } } });
    await assert.rejects(fx.c.health({ volumeId: "v" }), grpcError(status.UNIMPLEMENTED));
    assert.equal((await fx.c.heal({ volumeId: "v", stagingTargetPath: STAGING_PATH })).health?.state, State.HEALTHY);
    fx.stub.setState({ capabilities: { healVolume: false }, volumes: { v: { state: "ABNORMAL" } } });
    await assert.rejects(fx.c.heal({ volumeId: "v", stagingTargetPath: STAGING_PATH }), grpcError(status.UNIMPLEMENTED));
    assert.equal((await fx.c.health({ volumeId: "v" })).health?.state, State.ABNORMAL);
  });

  it("keeps the last good state and warns on stderr when the state file is malformed", async () => {
    fx.stub.setState({ volumes: { v: { state: "ABNORMAL" } } });
    assert.equal((await fx.c.health({ volumeId: "v" })).health?.state, State.ABNORMAL);
    for (const [bad, why] of [
      ['{"volumes": {"v": ', /not JSON/],
      ['{"volumes": {"v": {"state": "BROKEN"}}}', /state\.volumes\["v"\]\.state/],
      ['{"volumes": {"v": {"delayMS": 5}}}', /unknown key "delayMS"/],
      ['{"ready": "yes"}', /state\.ready: expected a boolean/],
    ] as const) {
      const before = fx.stub.proc.stderr().length;
      writeFileSync(fx.stub.stateFile, bad);
      assert.equal((await fx.c.health({ volumeId: "v" })).health?.state, State.ABNORMAL, `after ${bad}`);
      await waitFor(`a warning about ${bad}`, () => why.test(fx.stub.proc.stderr().slice(before)));
      assert.match(fx.stub.proc.stderr().slice(before), /malformed.*keeping the last good state/);
    }
    fx.stub.setState({ volumes: { v: { state: "HEALTHY" } } });
    assert.equal((await fx.c.health({ volumeId: "v" })).health?.state, State.HEALTHY, "a fixed file is read again");
  });

  it("a deleted state file means no volumes, ready, all capabilities", async () => {
    fx.stub.setState({ ready: false, capabilities: { healVolume: false }, volumes: { v: {} } });
    await assert.rejects(fx.c.health({ volumeId: "v" }), grpcError(status.FAILED_PRECONDITION));
    rmSync(fx.stub.stateFile);
    assert.deepEqual(await fx.c.probe(), { ready: true });
    assert.equal((await fx.c.getCapabilities()).capabilities.length, 3);
    await assert.rejects(fx.c.health({ volumeId: "v" }), grpcError(status.NOT_FOUND));
  });
});

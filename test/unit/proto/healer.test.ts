// healer.v1 (driver-facing) and sidecar.v1 (controller-facing) wire format (DESIGN 3.3, 3.4),
// from hand-written bytes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { VolumeCapability_AccessMode_Mode as Mode } from "../../../proto/gen/csi/v1/csi.js";
import {
  HealReason,
  MountPropagation as Propagation,
  NodeGetVolumeHealthRequest,
  NodeGetVolumeHealthResponse,
  NodeHealVolumeRequest,
  NodeHealVolumeResponse,
  NodeHealVolumeResponse_Result as Result,
  TargetResult_State as TargetState,
  VolumeHealerNodeService,
  VolumeHealth_State as State,
} from "../../../proto/gen/healer/v1/healer.js";
import {
  GetVolumeHealthRequest,
  GetVolumeHealthResponse,
  HealVolumeRequest,
  HealVolumeRequest_Mode as HealMode,
  HealVolumeResponse,
  VolumeHealerService,
} from "../../../proto/gen/sidecar/v1/healer.js";
import { assertWire } from "../../support/wire-vectors.js";

describe("healer.v1 wire format", () => {
  it("NodeHealVolumeRequest fields 1..9", () => {
    assertWire(
      NodeHealVolumeRequest,
      {
        volumeId: "v1",
        stagingTargetPath: "/s",
        volumePath: "/p",
        volumeCapability: { accessType: { $case: "block", block: {} }, accessMode: { mode: Mode.SINGLE_NODE_WRITER } },
        secrets: { k: "s" },
        volumeContext: { c: "d" },
        publishContext: { a: "b" },
        reason: HealReason.OPERATOR_REQUEST,
        targets: [{ targetPath: "/t", podNamespace: "n", podName: "p", podUid: "u", readonly: true, mountPropagation: Propagation.HOST_TO_CONTAINER }],
      },
      [
        "0a 02 76 31", // 1 volume_id "v1"
        "12 02 2f 73", // 2 staging_target_path "/s"
        "1a 02 2f 70", // 3 volume_path "/p"
        "22 06 0a 00 1a 02 08 01", // 4 volume_capability {block, SINGLE_NODE_WRITER}
        "2a 06 0a 01 6b 12 01 73", // 5 secrets {k: s}
        "32 06 0a 01 63 12 01 64", // 6 volume_context {c: d}
        "3a 06 0a 01 61 12 01 62", // 7 publish_context {a: b}
        "40 03", // 8 reason OPERATOR_REQUEST
        // 9 targets [{1 "/t", 2 "n", 3 "p", 4 "u", 5 readonly, 6 HOST_TO_CONTAINER}]
        "4a 11 0a 02 2f 74 12 01 6e 1a 01 70 22 01 75 28 01 30 02",
      ].join(" "),
    );
  });

  it("NodeGetVolumeHealthRequest fields 1..4", () => {
    assertWire(
      NodeGetVolumeHealthRequest,
      { volumeId: "v1", stagingTargetPath: "/s", volumePath: "/p", volumeContext: { c: "d" } },
      "0a 02 76 31  12 02 2f 73  1a 02 2f 70  22 06 0a 01 63 12 01 64",
    );
  });

  it("NodeGetVolumeHealthResponse with VolumeHealth{state, reason, message}", () => {
    assertWire(
      NodeGetVolumeHealthResponse,
      { health: { state: State.ABNORMAL, reason: "X", message: "y" } },
      // 0a 08 { 08 02 | 12 01 "X" | 1a 01 "y" }
      "0a 08 08 02 12 01 58 1a 01 79",
    );
  });

  it("NodeHealVolumeResponse: result 1, health 2, message 3, targets 4", () => {
    assertWire(
      NodeHealVolumeResponse,
      {
        result: Result.HEALED,
        health: { state: State.HEALTHY, reason: "", message: "" },
        message: "ok",
        targets: [{ targetPath: "/t", state: TargetState.RESTART_NEEDED, reason: "R", message: "m" }],
      },
      // targets: 22 0c { 1 "/t" | 2 RESTART_NEEDED | 3 "R" | 4 "m" }
      "08 01  12 02 08 01  1a 02 6f 6b  22 0c 0a 02 2f 74 10 02 1a 01 52 22 01 6d",
    );
  });

  it("enum numbers", () => {
    assert.deepEqual([State.STATE_UNSPECIFIED, State.HEALTHY, State.ABNORMAL, State.UNSUPPORTED], [0, 1, 2, 3]);
    assert.deepEqual([Result.RESULT_UNSPECIFIED, Result.HEALED, Result.NOT_NEEDED, Result.NOT_HEALABLE], [0, 1, 2, 3]);
    // Every zero is UNSPECIFIED: a field left out never means a choice.
    assert.deepEqual([HealMode.MODE_UNSPECIFIED, HealMode.ALWAYS, HealMode.IF_ABNORMAL], [0, 1, 2]);
    assert.deepEqual([HealReason.HEAL_REASON_UNSPECIFIED, HealReason.DRIVER_RESTARTED, HealReason.VOLUME_ABNORMAL, HealReason.OPERATOR_REQUEST], [0, 1, 2, 3]);
    assert.deepEqual([Propagation.MOUNT_PROPAGATION_UNSPECIFIED, Propagation.NONE, Propagation.HOST_TO_CONTAINER, Propagation.BIDIRECTIONAL], [0, 1, 2, 3]);
    assert.deepEqual([TargetState.STATE_UNSPECIFIED, TargetState.WHOLE_IN_PLACE, TargetState.RESTART_NEEDED, TargetState.NOT_MOUNTED], [0, 1, 2, 3]);
  });

  it("service and method names", () => {
    assert.deepEqual(
      Object.values(VolumeHealerNodeService).map((m) => m.path),
      ["/healer.v1.VolumeHealerNode/NodeGetVolumeHealth", "/healer.v1.VolumeHealerNode/NodeHealVolume"],
    );
    assert.deepEqual(
      Object.values(VolumeHealerService).map((m) => m.path),
      ["/sidecar.v1.VolumeHealer/GetVolumeHealth", "/sidecar.v1.VolumeHealer/HealVolume"],
    );
  });
});

describe("sidecar.v1 wire format", () => {
  it("HealVolumeRequest pv_name 1, mode 2, reason 3", () => {
    assertWire(HealVolumeRequest, { pvName: "pv-1", mode: HealMode.IF_ABNORMAL, reason: HealReason.VOLUME_ABNORMAL }, "0a 04 70 76 2d 31  10 02  18 02");
    assertWire(HealVolumeRequest, { pvName: "pv-1", mode: HealMode.ALWAYS, reason: HealReason.DRIVER_RESTARTED }, "0a 04 70 76 2d 31  10 01  18 01");
  });

  it("HealVolumeRequest without a mode or reason reads as UNSPECIFIED (0), never as a heal", () => {
    assertWire(HealVolumeRequest, { pvName: "pv-1", mode: HealMode.MODE_UNSPECIFIED, reason: HealReason.HEAL_REASON_UNSPECIFIED }, "0a 04 70 76 2d 31");
  });

  it("HealVolumeResponse: result 1, health 2, message 3, volume_id 4, pods 5", () => {
    assertWire(
      HealVolumeResponse,
      {
        result: Result.NOT_NEEDED,
        health: { state: State.HEALTHY, reason: "", message: "" },
        message: "m",
        volumeId: "v1",
        pods: [{ namespace: "n", name: "p", uid: "u", state: TargetState.WHOLE_IN_PLACE, reason: "R", message: "m" }],
      },
      // pods: 2a 11 { 1 "n" | 2 "p" | 3 "u" | 4 WHOLE_IN_PLACE | 5 "R" | 6 "m" }
      "08 02  12 02 08 01  1a 01 6d  22 02 76 31  2a 11 0a 01 6e 12 01 70 1a 01 75 20 01 2a 01 52 32 01 6d",
    );
  });

  it("GetVolumeHealthRequest pv_name 1; GetVolumeHealthResponse health 1, volume_id 2", () => {
    assertWire(GetVolumeHealthRequest, { pvName: "pv-1" }, "0a 04 70 76 2d 31");
    assertWire(GetVolumeHealthResponse, { health: { state: State.HEALTHY, reason: "", message: "" }, volumeId: "v1" }, "0a 02 08 01  12 02 76 31");
  });
});

// healer.v1 (driver-facing) and sidecar.v1 (controller-facing) wire format (DESIGN 3.3, 3.4),
// from hand-written bytes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { VolumeCapability_AccessMode_Mode as Mode } from "../../../proto/gen/csi/v1/csi.js";
import {
  NodeGetVolumeHealthRequest,
  NodeGetVolumeHealthResponse,
  NodeHealVolumeRequest,
  NodeHealVolumeResponse,
  NodeHealVolumeResponse_Result as Result,
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
  it("NodeHealVolumeRequest fields 1..7", () => {
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
      },
      [
        "0a 02 76 31", // 1 volume_id "v1"
        "12 02 2f 73", // 2 staging_target_path "/s"
        "1a 02 2f 70", // 3 volume_path "/p"
        "22 06 0a 00 1a 02 08 01", // 4 volume_capability {block, SINGLE_NODE_WRITER}
        "2a 06 0a 01 6b 12 01 73", // 5 secrets {k: s}
        "32 06 0a 01 63 12 01 64", // 6 volume_context {c: d}
        "3a 06 0a 01 61 12 01 62", // 7 publish_context {a: b}
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

  it("NodeHealVolumeResponse: result 1, health 2, message 3", () => {
    assertWire(
      NodeHealVolumeResponse,
      { result: Result.HEALED, health: { state: State.HEALTHY, reason: "", message: "" }, message: "ok" },
      "08 01  12 02 08 01  1a 02 6f 6b",
    );
  });

  it("enum numbers", () => {
    assert.deepEqual([State.STATE_UNKNOWN, State.HEALTHY, State.ABNORMAL, State.UNSUPPORTED], [0, 1, 2, 3]);
    assert.deepEqual([Result.RESULT_UNKNOWN, Result.HEALED, Result.NOT_NEEDED, Result.NOT_HEALABLE], [0, 1, 2, 3]);
    assert.deepEqual([HealMode.ALWAYS, HealMode.IF_ABNORMAL], [0, 1]);
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
  it("HealVolumeRequest pv_name 1, mode IF_ABNORMAL at field 2", () => {
    assertWire(HealVolumeRequest, { pvName: "pv-1", mode: HealMode.IF_ABNORMAL }, "0a 04 70 76 2d 31  10 01");
  });

  it("HealVolumeRequest mode ALWAYS is the default and not written", () => {
    assertWire(HealVolumeRequest, { pvName: "pv-1", mode: HealMode.ALWAYS }, "0a 04 70 76 2d 31");
  });

  it("HealVolumeResponse: result 1, health 2, message 3, volume_id 4", () => {
    assertWire(
      HealVolumeResponse,
      { result: Result.NOT_NEEDED, health: { state: State.HEALTHY, reason: "", message: "" }, message: "m", volumeId: "v1" },
      "08 02  12 02 08 01  1a 01 6d  22 02 76 31",
    );
  });

  it("GetVolumeHealthRequest pv_name 1; GetVolumeHealthResponse health 1, volume_id 2", () => {
    assertWire(GetVolumeHealthRequest, { pvName: "pv-1" }, "0a 04 70 76 2d 31");
    assertWire(GetVolumeHealthResponse, { health: { state: State.HEALTHY, reason: "", message: "" }, volumeId: "v1" }, "0a 02 08 01  12 02 76 31");
  });
});

// csi.v1 subset wire compatibility with the CSI spec's field numbers (DESIGN 3.2), from hand-written bytes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  GetPluginInfoResponse,
  IdentityService,
  NodeService,
  NodeStageVolumeRequest,
  VolumeCapability,
  VolumeCapability_AccessMode_Mode as Mode,
} from "../../../proto/gen/csi/v1/csi.js";
import { assertDecodes, assertWire } from "../../support/wire-vectors.js";

const mountCapability: VolumeCapability = {
  accessType: { $case: "mount", mount: { fsType: "ext4", mountFlags: ["ro", "noatime"], volumeMountGroup: "" } },
  accessMode: { mode: Mode.SINGLE_NODE_MULTI_WRITER },
};

describe("csi.v1 wire format", () => {
  it("VolumeCapability Mount{fs_type, mount_flags} (field 2) + access_mode (field 3)", () => {
    assertWire(
      VolumeCapability,
      mountCapability,
      // 12 13 { 0a 04 "ext4" | 12 02 "ro" | 12 07 "noatime" } | 1a 02 { 08 07 }
      "12 13 0a 04 65 78 74 34 12 02 72 6f 12 07 6e 6f 61 74 69 6d 65  1a 02 08 07",
    );
  });

  it("MountVolume volume_mount_group is field 3", () => {
    assertWire(
      VolumeCapability,
      { accessType: { $case: "mount", mount: { fsType: "", mountFlags: [], volumeMountGroup: "g" } }, accessMode: undefined },
      "12 03 1a 01 67",
    );
  });

  it("VolumeCapability Block (field 1, empty) + access_mode MULTI_NODE_MULTI_WRITER", () => {
    assertWire(VolumeCapability, { accessType: { $case: "block", block: {} }, accessMode: { mode: Mode.MULTI_NODE_MULTI_WRITER } }, "0a 00 1a 02 08 05");
  });

  it("decodes access_mode before access_type, as another encoder may order them", () => {
    assertDecodes(VolumeCapability, "1a 02 08 07  12 13 0a 04 65 78 74 34 12 02 72 6f 12 07 6e 6f 61 74 69 6d 65", mountCapability);
  });

  it("access mode numbers are the CSI spec's", () => {
    assert.deepEqual(
      [
        Mode.UNKNOWN,
        Mode.SINGLE_NODE_WRITER,
        Mode.SINGLE_NODE_READER_ONLY,
        Mode.MULTI_NODE_READER_ONLY,
        Mode.MULTI_NODE_SINGLE_WRITER,
        Mode.MULTI_NODE_MULTI_WRITER,
        Mode.SINGLE_NODE_SINGLE_WRITER,
        Mode.SINGLE_NODE_MULTI_WRITER,
      ],
      [0, 1, 2, 3, 4, 5, 6, 7],
    );
  });

  it("NodeStageVolumeRequest fields 1..6", () => {
    assertWire(
      NodeStageVolumeRequest,
      {
        volumeId: "v1",
        publishContext: { a: "b" },
        stagingTargetPath: "/s",
        volumeCapability: { accessType: { $case: "block", block: {} }, accessMode: { mode: Mode.SINGLE_NODE_WRITER } },
        secrets: { k: "s" },
        volumeContext: { c: "d" },
      },
      [
        "0a 02 76 31", // 1 volume_id "v1"
        "12 06 0a 01 61 12 01 62", // 2 publish_context {a: b}
        "1a 02 2f 73", // 3 staging_target_path "/s"
        "22 06 0a 00 1a 02 08 01", // 4 volume_capability {block, SINGLE_NODE_WRITER}
        "2a 06 0a 01 6b 12 01 73", // 5 secrets {k: s}
        "32 06 0a 01 63 12 01 64", // 6 volume_context {c: d}
      ].join(" "),
    );
  });

  it("GetPluginInfoResponse: name 1, vendor_version 2, manifest 3", () => {
    assertWire(GetPluginInfoResponse, { name: "drv", vendorVersion: "1.0", manifest: { k: "v" } }, "0a 03 64 72 76  12 03 31 2e 30  1a 06 0a 01 6b 12 01 76");
  });

  it("service and method names are the CSI spec's", () => {
    assert.deepEqual(
      Object.values(IdentityService).map((m) => m.path),
      ["/csi.v1.Identity/GetPluginInfo", "/csi.v1.Identity/GetPluginCapabilities", "/csi.v1.Identity/Probe"],
    );
    assert.deepEqual(
      Object.values(NodeService).map((m) => m.path),
      ["/csi.v1.Node/NodeStageVolume", "/csi.v1.Node/NodeUnstageVolume", "/csi.v1.Node/NodeGetCapabilities", "/csi.v1.Node/NodeGetInfo"],
    );
  });
});

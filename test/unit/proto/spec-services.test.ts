// The csi-addons/spec driver services the sidecar calls for the upstream controller (packages
// reclaimspace, encryptionkeyrotation, fence, replication, volumegroup), from hand-written bytes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Volume, VolumeCapability_AccessMode_Mode as Mode } from "../../../proto/gen/csi/v1/csi.js";
import { EncryptionKeyRotateRequest, EncryptionKeyRotationControllerService } from "../../../proto/gen/encryptionkeyrotation/encryptionkeyrotation.js";
import {
  FenceClusterNetworkRequest,
  FenceControllerService,
  GetFenceClientsRequest,
  GetFenceClientsResponse,
  ListClusterFenceResponse,
  UnfenceClusterNetworkRequest,
} from "../../../proto/gen/fence/fence.js";
import {
  ControllerReclaimSpaceRequest,
  NodeReclaimSpaceRequest,
  NodeReclaimSpaceResponse,
  ReclaimSpaceControllerService,
  ReclaimSpaceNodeService,
} from "../../../proto/gen/reclaimspace/reclaimspace.js";
import {
  ControllerService as ReplicationController,
  EnableVolumeReplicationRequest,
  GetReplicationDestinationInfoRequest,
  GetVolumeReplicationInfoRequest,
  PromoteVolumeRequest,
} from "../../../proto/gen/replication/replication.js";
import {
  ControllerGetVolumeGroupRequest,
  ControllerService as VolumeGroupController,
  CreateVolumeGroupRequest,
  CreateVolumeGroupResponse,
  DeleteVolumeGroupRequest,
  ListVolumeGroupsRequest,
  ListVolumeGroupsResponse,
  ModifyVolumeGroupMembershipRequest,
} from "../../../proto/gen/volumegroup/volumegroup.js";
import { assertWire } from "../../support/wire-vectors.js";

const KV = "0a 01 6b 12 01 76"; // map entry {k: "v"}
const KS = "0a 01 6b 12 01 73"; // map entry {k: "s"}

describe("csi-addons spec driver services wire format", () => {
  it("ControllerReclaimSpaceRequest: volume_id 1, parameters 2, secrets 3", () => {
    assertWire(ControllerReclaimSpaceRequest, { volumeId: "v", parameters: { k: "v" }, secrets: { k: "s" } }, `0a 01 76  12 06 ${KV}  1a 06 ${KS}`);
  });

  it("NodeReclaimSpaceRequest 1..5; response pre_usage 1, post_usage 2", () => {
    assertWire(
      NodeReclaimSpaceRequest,
      {
        volumeId: "v",
        volumePath: "/p",
        stagingTargetPath: "/s",
        volumeCapability: { accessType: { $case: "block", block: {} }, accessMode: { mode: Mode.SINGLE_NODE_WRITER } },
        secrets: { k: "s" },
      },
      `0a 01 76  12 02 2f 70  1a 02 2f 73  22 06 0a 00 1a 02 08 01  2a 06 ${KS}`,
    );
    assertWire(NodeReclaimSpaceResponse, { preUsage: { usageBytes: 300 }, postUsage: { usageBytes: 1 } }, "0a 03 08 ac 02  12 02 08 01");
  });

  it("EncryptionKeyRotateRequest: volume_id 1, volume_path 2, encryption_key 3, parameters 4, secrets 5, volume_capability 6", () => {
    assertWire(
      EncryptionKeyRotateRequest,
      {
        volumeId: "v",
        volumePath: "/p",
        encryptionKey: "e",
        parameters: { k: "v" },
        secrets: { k: "s" },
        volumeCapability: {
          accessType: { $case: "mount", mount: { fsType: "x", mountFlags: [], volumeMountGroup: "" } },
          accessMode: { mode: Mode.SINGLE_NODE_MULTI_WRITER },
        },
      },
      `0a 01 76  12 02 2f 70  1a 01 65  22 06 ${KV}  2a 06 ${KS}  32 09 12 03 0a 01 78 1a 02 08 07`,
    );
  });

  it("Fence/Unfence: parameters 1, secrets 2, cidrs 3 (CIDR{cidr 1}); ListClusterFenceResponse cidrs 1", () => {
    for (const type of [FenceClusterNetworkRequest, UnfenceClusterNetworkRequest]) {
      assertWire(type, { parameters: { k: "v" }, secrets: { k: "s" }, cidrs: [{ cidr: "c" }] }, `0a 06 ${KV}  12 06 ${KS}  1a 03 0a 01 63`);
    }
    assertWire(ListClusterFenceResponse, { cidrs: [{ cidr: "c" }] }, "0a 03 0a 01 63");
  });

  it("GetFenceClients: parameters 1, secrets 2; clients 1 {id 1, addresses 2}", () => {
    assertWire(GetFenceClientsRequest, { parameters: { k: "v" }, secrets: { k: "s" } }, `0a 06 ${KV}  12 06 ${KS}`);
    assertWire(GetFenceClientsResponse, { clients: [{ id: "i", addresses: [{ cidr: "c" }] }] }, "0a 08 0a 01 69 12 03 0a 01 63");
  });

  it("replication Enable: volume_id 1, parameters 2, secrets 3, replication_id 4, replication_source 5", () => {
    assertWire(
      EnableVolumeReplicationRequest,
      {
        volumeId: "v",
        parameters: { k: "v" },
        secrets: { k: "s" },
        replicationId: "r",
        replicationSource: { type: { $case: "volume", volume: { volumeId: "v" } } },
      },
      `0a 01 76  12 06 ${KV}  1a 06 ${KS}  22 01 72  2a 05 0a 03 0a 01 76`,
    );
  });

  it("replication Promote: force 2, parameters 3, secrets 4, replication_id 5, source 6 (volumegroup 2)", () => {
    assertWire(
      PromoteVolumeRequest,
      {
        volumeId: "v",
        force: true,
        parameters: { k: "v" },
        secrets: { k: "s" },
        replicationId: "r",
        replicationSource: { type: { $case: "volumegroup", volumegroup: { volumeGroupId: "g" } } },
      },
      `0a 01 76  10 01  1a 06 ${KV}  22 06 ${KS}  2a 01 72  32 05 12 03 0a 01 67`,
    );
  });

  it("replication GetVolumeReplicationInfo 1..4; GetReplicationDestinationInfo secrets 1, source 2", () => {
    assertWire(
      GetVolumeReplicationInfoRequest,
      { volumeId: "v", secrets: { k: "s" }, replicationId: "r", replicationSource: { type: { $case: "volume", volume: { volumeId: "v" } } } },
      `0a 01 76  12 06 ${KS}  1a 01 72  22 05 0a 03 0a 01 76`,
    );
    assertWire(
      GetReplicationDestinationInfoRequest,
      { secrets: { k: "s" }, replicationSource: { type: { $case: "volume", volume: { volumeId: "v" } } } },
      `0a 06 ${KS}  12 05 0a 03 0a 01 76`,
    );
    assertWire(
      GetReplicationDestinationInfoRequest,
      { secrets: { k: "s" }, replicationSource: { type: { $case: "volumegroup", volumegroup: { volumeGroupId: "g" } } } },
      `0a 06 ${KS}  12 05 12 03 0a 01 67`,
    );
  });

  it("volumegroup Create: name 1, parameters 2, secrets 3, volume_ids 4; VolumeGroup {id 1, context 2, volumes 3 (csi.v1.Volume)}", () => {
    assertWire(
      CreateVolumeGroupRequest,
      { name: "g", parameters: { k: "v" }, secrets: { k: "s" }, volumeIds: ["a"] },
      `0a 01 67  12 06 ${KV}  1a 06 ${KS}  22 01 61`,
    );
    assertWire(
      CreateVolumeGroupResponse,
      { volumeGroup: { volumeGroupId: "g", volumeGroupContext: {}, volumes: [{ capacityBytes: 0, volumeId: "a", volumeContext: {} }] } },
      "0a 08 0a 01 67 1a 03 12 01 61",
    );
    assertWire(Volume, { capacityBytes: 1, volumeId: "a", volumeContext: { k: "v" } }, `08 01  12 01 61  1a 06 ${KV}`);
  });

  it("volumegroup Modify 1..4, Delete and ControllerGet {id 1, secrets 2}, List 1..3 and its response", () => {
    assertWire(
      ModifyVolumeGroupMembershipRequest,
      { volumeGroupId: "g", volumeIds: ["a"], secrets: { k: "s" }, parameters: { k: "v" } },
      `0a 01 67  12 01 61  1a 06 ${KS}  22 06 ${KV}`,
    );
    for (const type of [DeleteVolumeGroupRequest, ControllerGetVolumeGroupRequest]) {
      assertWire(type, { volumeGroupId: "g", secrets: { k: "s" } }, `0a 01 67  12 06 ${KS}`);
    }
    assertWire(ListVolumeGroupsRequest, { maxEntries: 5, startingToken: "t", secrets: { k: "s" } }, `08 05  12 01 74  1a 06 ${KS}`);
    assertWire(
      ListVolumeGroupsResponse,
      { entries: [{ volumeGroup: { volumeGroupId: "g", volumeGroupContext: {}, volumes: [] } }], nextToken: "n" },
      "0a 05 0a 03 0a 01 67  12 01 6e",
    );
  });

  it("service and method paths are the spec's", () => {
    const paths = (svc: Record<string, { path: string }>) => Object.values(svc).map((m) => m.path);
    assert.deepEqual(paths(ReclaimSpaceControllerService), ["/reclaimspace.ReclaimSpaceController/ControllerReclaimSpace"]);
    assert.deepEqual(paths(ReclaimSpaceNodeService), ["/reclaimspace.ReclaimSpaceNode/NodeReclaimSpace"]);
    assert.deepEqual(paths(EncryptionKeyRotationControllerService), ["/encryptionkeyrotation.EncryptionKeyRotationController/EncryptionKeyRotate"]);
    assert.deepEqual(paths(FenceControllerService), [
      "/fence.FenceController/FenceClusterNetwork",
      "/fence.FenceController/UnfenceClusterNetwork",
      "/fence.FenceController/ListClusterFence",
      "/fence.FenceController/GetFenceClients",
    ]);
    assert.deepEqual(paths(ReplicationController), [
      "/replication.Controller/EnableVolumeReplication",
      "/replication.Controller/DisableVolumeReplication",
      "/replication.Controller/PromoteVolume",
      "/replication.Controller/DemoteVolume",
      "/replication.Controller/ResyncVolume",
      "/replication.Controller/GetVolumeReplicationInfo",
      "/replication.Controller/GetReplicationDestinationInfo",
    ]);
    assert.deepEqual(paths(VolumeGroupController), [
      "/volumegroup.Controller/CreateVolumeGroup",
      "/volumegroup.Controller/ModifyVolumeGroupMembership",
      "/volumegroup.Controller/DeleteVolumeGroup",
      "/volumegroup.Controller/ListVolumeGroups",
      "/volumegroup.Controller/ControllerGetVolumeGroup",
    ]);
  });
});

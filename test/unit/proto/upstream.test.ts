// The upstream csi-addons controller-facing services (package `proto`, kubernetes-csi-addons
// internal/proto) from hand-written bytes: what the upstream controller sends our sidecar.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EncryptionKeyRotateRequest, EncryptionKeyRotationService } from "../../../proto/gen/proto/encryptionkeyrotation.js";
import { FenceClientsRequest, FenceClientsResponse, NetworkFenceRequest, NetworkFenceService } from "../../../proto/gen/proto/networkfence.js";
import { ReclaimSpaceRequest, ReclaimSpaceResponse, ReclaimSpaceService } from "../../../proto/gen/proto/reclaimspace.js";
import {
  EnableVolumeReplicationRequest,
  GetReplicationDestinationInfoRequest,
  GetReplicationDestinationInfoResponse,
  GetVolumeReplicationInfoRequest,
  GetVolumeReplicationInfoResponse,
  GetVolumeReplicationInfoResponse_Status as ReplStatus,
  PromoteVolumeRequest,
  ReplicationService,
  ResyncVolumeResponse,
} from "../../../proto/gen/proto/replication.js";
import {
  ControllerGetVolumeGroupRequest,
  CreateVolumeGroupRequest,
  CreateVolumeGroupResponse,
  DeleteVolumeGroupRequest,
  ModifyVolumeGroupMembershipRequest,
  VolumeGroupControllerService,
} from "../../../proto/gen/proto/volumegroup.js";
import { assertWire } from "../../support/wire-vectors.js";

const KV = "0a 01 6b 12 01 76"; // map entry {k: "v"}

describe("upstream controller-facing wire format (package proto)", () => {
  it("ReclaimSpaceRequest: pv_name 1; ReclaimSpaceResponse: pre_usage 1, post_usage 2 {usage_bytes 1}", () => {
    assertWire(ReclaimSpaceRequest, { pvName: "pv" }, "0a 02 70 76");
    assertWire(ReclaimSpaceResponse, { preUsage: { usageBytes: 300 }, postUsage: { usageBytes: 3 } }, "0a 03 08 ac 02  12 02 08 03");
  });

  it("EncryptionKeyRotateRequest: pv_name 1", () => {
    assertWire(EncryptionKeyRotateRequest, { pvName: "pv" }, "0a 02 70 76");
  });

  it("NetworkFenceRequest: parameters 1, secret_name 2, secret_namespace 3, cidrs 4 (strings)", () => {
    assertWire(
      NetworkFenceRequest,
      { parameters: { k: "v" }, secretName: "s", secretNamespace: "n", cidrs: ["c", "d"] },
      `0a 06 ${KV}  12 01 73  1a 01 6e  22 01 63  22 01 64`,
    );
  });

  it("FenceClientsRequest 1..3; FenceClientsResponse: clients 1 {id 1, cidrs 2}", () => {
    assertWire(FenceClientsRequest, { parameters: { k: "v" }, secretName: "s", secretNamespace: "n" }, `0a 06 ${KV}  12 01 73  1a 01 6e`);
    assertWire(FenceClientsResponse, { clients: [{ id: "i", cidrs: ["c"] }] }, "0a 06 0a 01 69 12 01 63");
  });

  it("EnableVolumeReplicationRequest: volume_id 1, replication_id 2, parameters 3, secret_name 4, secret_namespace 5, replication_source 6", () => {
    assertWire(
      EnableVolumeReplicationRequest,
      {
        volumeId: "v",
        replicationId: "r",
        parameters: { k: "v" },
        secretName: "s",
        secretNamespace: "n",
        replicationSource: { type: { $case: "volume", volume: { volumeId: "v" } } },
      },
      `0a 01 76  12 01 72  1a 06 ${KV}  22 01 73  2a 01 6e  32 05 0a 03 0a 01 76`,
    );
  });

  it("PromoteVolumeRequest: force 3, parameters 4, secrets 5/6, replication_source 7 with volume_group 2", () => {
    assertWire(
      PromoteVolumeRequest,
      {
        volumeId: "",
        replicationId: "r",
        force: true,
        parameters: { k: "v" },
        secretName: "s",
        secretNamespace: "n",
        replicationSource: { type: { $case: "volumeGroup", volumeGroup: { volumeGroupId: "g" } } },
      },
      `12 01 72  18 01  22 06 ${KV}  2a 01 73  32 01 6e  3a 05 12 03 0a 01 67`,
    );
    assertWire(ResyncVolumeResponse, { ready: true }, "08 01");
  });

  it("GetVolumeReplicationInfo: request 1..5; response last_sync_time 1, duration 2, bytes 3, status 4, status_message 5", () => {
    assertWire(
      GetVolumeReplicationInfoRequest,
      {
        volumeId: "",
        replicationId: "r",
        secretName: "s",
        secretNamespace: "n",
        replicationSource: { type: { $case: "volume", volume: { volumeId: "v" } } },
      },
      "12 01 72  1a 01 73  22 01 6e  2a 05 0a 03 0a 01 76",
    );
    assertWire(
      GetVolumeReplicationInfoResponse,
      { lastSyncTime: new Date(1000), lastSyncDuration: { seconds: 2, nanos: 0 }, lastSyncBytes: 7, status: ReplStatus.HEALTHY, statusMessage: "m" },
      "0a 02 08 01  12 02 08 02  18 07  20 01  2a 01 6d",
    );
    assert.deepEqual([ReplStatus.UNKNOWN, ReplStatus.HEALTHY, ReplStatus.DEGRADED, ReplStatus.ERROR], [0, 1, 2, 3]);
  });

  it("GetReplicationDestinationInfo: secret_name 1, secret_namespace 2, source 3; destination 1 {volumegroup 2 {id 1, volume_ids 2}}", () => {
    assertWire(
      GetReplicationDestinationInfoRequest,
      { secretName: "s", secretNamespace: "n", replicationSource: { type: { $case: "volume", volume: { volumeId: "v" } } } },
      "0a 01 73  12 01 6e  1a 05 0a 03 0a 01 76",
    );
    assertWire(
      GetReplicationDestinationInfoRequest,
      { secretName: "s", secretNamespace: "n", replicationSource: { type: { $case: "volumeGroup", volumeGroup: { volumeGroupId: "g" } } } },
      "0a 01 73  12 01 6e  1a 05 12 03 0a 01 67",
    );
    assertWire(
      GetReplicationDestinationInfoResponse,
      { replicationDestination: { type: { $case: "volumegroup", volumegroup: { volumeGroupId: "g", volumeIds: { a: "b" } } } } },
      "0a 0d 12 0b 0a 01 67 12 06 0a 01 61 12 01 62",
    );
  });

  it("CreateVolumeGroup: name 1, parameters 2, secret_name 3, secret_namespace 4, volume_ids 5; VolumeGroup {id 1, context 2, volume_ids 3}", () => {
    assertWire(
      CreateVolumeGroupRequest,
      { name: "g", parameters: { k: "v" }, secretName: "s", secretNamespace: "n", volumeIds: ["a", "b"] },
      `0a 01 67  12 06 ${KV}  1a 01 73  22 01 6e  2a 01 61  2a 01 62`,
    );
    assertWire(
      CreateVolumeGroupResponse,
      { volumeGroup: { volumeGroupId: "g", volumeGroupContext: { k: "v" }, volumeIds: ["a"] } },
      `0a 0e 0a 01 67 12 06 ${KV} 1a 01 61`,
    );
  });

  it("ModifyVolumeGroupMembership 1..5, DeleteVolumeGroup and ControllerGetVolumeGroup 1..3", () => {
    assertWire(
      ModifyVolumeGroupMembershipRequest,
      { volumeGroupId: "g", volumeIds: ["a"], secretName: "s", secretNamespace: "n", parameters: { k: "v" } },
      `0a 01 67  12 01 61  1a 01 73  22 01 6e  2a 06 ${KV}`,
    );
    for (const type of [DeleteVolumeGroupRequest, ControllerGetVolumeGroupRequest]) {
      assertWire(type, { volumeGroupId: "g", secretName: "s", secretNamespace: "n" }, "0a 01 67  12 01 73  1a 01 6e");
    }
  });

  it("service and method paths are upstream's", () => {
    const paths = (svc: Record<string, { path: string }>) => Object.values(svc).map((m) => m.path);
    assert.deepEqual(paths(ReclaimSpaceService), ["/proto.ReclaimSpace/ControllerReclaimSpace", "/proto.ReclaimSpace/NodeReclaimSpace"]);
    assert.deepEqual(paths(EncryptionKeyRotationService), ["/proto.EncryptionKeyRotation/EncryptionKeyRotate"]);
    assert.deepEqual(paths(NetworkFenceService), [
      "/proto.NetworkFence/FenceClusterNetwork",
      "/proto.NetworkFence/UnFenceClusterNetwork",
      "/proto.NetworkFence/GetFenceClients",
    ]);
    assert.deepEqual(paths(ReplicationService), [
      "/proto.Replication/EnableVolumeReplication",
      "/proto.Replication/DisableVolumeReplication",
      "/proto.Replication/PromoteVolume",
      "/proto.Replication/DemoteVolume",
      "/proto.Replication/ResyncVolume",
      "/proto.Replication/GetVolumeReplicationInfo",
      "/proto.Replication/GetReplicationDestinationInfo",
    ]);
    assert.deepEqual(paths(VolumeGroupControllerService), [
      "/proto.VolumeGroupController/CreateVolumeGroup",
      "/proto.VolumeGroupController/ModifyVolumeGroupMembership",
      "/proto.VolumeGroupController/DeleteVolumeGroup",
      "/proto.VolumeGroupController/ControllerGetVolumeGroup",
    ]);
  });
});

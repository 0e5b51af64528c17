// Clients of the csi-addons spec services on a stub's addons socket (built from our copy of the spec).
import { credentials } from "@grpc/grpc-js";
import * as ekr from "../../proto/gen/encryptionkeyrotation/encryptionkeyrotation.js";
import * as fence from "../../proto/gen/fence/fence.js";
import * as reclaim from "../../proto/gen/reclaimspace/reclaimspace.js";
import * as replication from "../../proto/gen/replication/replication.js";
import * as volumegroup from "../../proto/gen/volumegroup/volumegroup.js";
import type { DriverStub } from "./driver-stub.js";
import { rpc } from "./driver-stub-clients.js";

export function addonsClients(stub: Pick<DriverStub, "addonsEndpoint">) {
  const insecure = credentials.createInsecure();
  const rsc = new reclaim.ReclaimSpaceControllerClient(stub.addonsEndpoint, insecure);
  const rsn = new reclaim.ReclaimSpaceNodeClient(stub.addonsEndpoint, insecure);
  const keys = new ekr.EncryptionKeyRotationControllerClient(stub.addonsEndpoint, insecure);
  const fc = new fence.FenceControllerClient(stub.addonsEndpoint, insecure);
  const rc = new replication.ControllerClient(stub.addonsEndpoint, insecure);
  const vg = new volumegroup.ControllerClient(stub.addonsEndpoint, insecure);
  return {
    controllerReclaimSpace: rpc(rsc, rsc.controllerReclaimSpace, reclaim.ControllerReclaimSpaceRequest),
    nodeReclaimSpace: rpc(rsn, rsn.nodeReclaimSpace, reclaim.NodeReclaimSpaceRequest),
    rotateKey: rpc(keys, keys.encryptionKeyRotate, ekr.EncryptionKeyRotateRequest),
    fence: rpc(fc, fc.fenceClusterNetwork, fence.FenceClusterNetworkRequest),
    unfence: rpc(fc, fc.unfenceClusterNetwork, fence.UnfenceClusterNetworkRequest),
    listFence: rpc(fc, fc.listClusterFence, fence.ListClusterFenceRequest),
    fenceClients: rpc(fc, fc.getFenceClients, fence.GetFenceClientsRequest),
    enableReplication: rpc(rc, rc.enableVolumeReplication, replication.EnableVolumeReplicationRequest),
    disableReplication: rpc(rc, rc.disableVolumeReplication, replication.DisableVolumeReplicationRequest),
    promote: rpc(rc, rc.promoteVolume, replication.PromoteVolumeRequest),
    demote: rpc(rc, rc.demoteVolume, replication.DemoteVolumeRequest),
    resync: rpc(rc, rc.resyncVolume, replication.ResyncVolumeRequest),
    replicationInfo: rpc(rc, rc.getVolumeReplicationInfo, replication.GetVolumeReplicationInfoRequest),
    destinationInfo: rpc(rc, rc.getReplicationDestinationInfo, replication.GetReplicationDestinationInfoRequest),
    createGroup: rpc(vg, vg.createVolumeGroup, volumegroup.CreateVolumeGroupRequest),
    modifyGroup: rpc(vg, vg.modifyVolumeGroupMembership, volumegroup.ModifyVolumeGroupMembershipRequest),
    deleteGroup: rpc(vg, vg.deleteVolumeGroup, volumegroup.DeleteVolumeGroupRequest),
    listGroups: rpc(vg, vg.listVolumeGroups, volumegroup.ListVolumeGroupsRequest),
    getGroup: rpc(vg, vg.controllerGetVolumeGroup, volumegroup.ControllerGetVolumeGroupRequest),
    close() {
      for (const c of [rsc, rsn, keys, fc, rc, vg]) c.close();
    },
  };
}

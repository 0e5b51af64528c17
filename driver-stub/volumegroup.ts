// volumegroup.Controller: groups live in the state file ("groups", by volume_group_id). The id is
// derived from the suggested name, so a repeated CreateVolumeGroup is idempotent.
import {
  ControllerGetVolumeGroupRequest,
  ControllerService,
  CreateVolumeGroupRequest,
  DeleteVolumeGroupRequest,
  ListVolumeGroupsRequest,
  ModifyVolumeGroupMembershipRequest,
  type ControllerServer,
  type VolumeGroup,
} from "../proto/gen/volumegroup/volumegroup.js";
import type { GroupSpec } from "./addons-state.js";
import { admitAddon, type Driver } from "./driver.js";
import type { ResolvedState } from "./state.js";
import { unary, type RpcEnv } from "./rpc.js";
import { Status, StatusError } from "./status.js";

const CAPABILITY = "VolumeGroup VOLUME_GROUP";

function toProto(id: string, g: Required<GroupSpec>): VolumeGroup {
  return {
    volumeGroupId: id,
    volumeGroupContext: g.context,
    volumes: g.volumeIds.map((volumeId) => ({ capacityBytes: 0, volumeId, volumeContext: {} })),
  };
}

function existing(state: ResolvedState, id: string): Required<GroupSpec> {
  const g = state.addons.groups[id];
  if (!g) throw new StatusError(Status.NOT_FOUND, `volume group ${id} does not exist`);
  return g;
}

export function volumeGroupServer(driver: Driver, env: RpcEnv): ControllerServer {
  const save = (id: string, g: GroupSpec | undefined) =>
    driver.store.update((raw) => {
      const groups = { ...raw.groups };
      if (g) groups[id] = g;
      else delete groups[id];
      return { ...raw, groups };
    });
  return {
    createVolumeGroup: unary(env, ControllerService.createVolumeGroup, CreateVolumeGroupRequest, async (req) => {
      const state = admitAddon(driver, "volumeGroup", CAPABILITY, { name: req.name });
      const id = `group-${req.name}`;
      const found = state.addons.groups[id];
      if (found) return { volumeGroup: toProto(id, found) };
      const after = save(id, { name: req.name, volumeIds: req.volumeIds, context: {} });
      return { volumeGroup: toProto(id, existing(after, id)) };
    }),
    modifyVolumeGroupMembership: unary(env, ControllerService.modifyVolumeGroupMembership, ModifyVolumeGroupMembershipRequest, async (req) => {
      const state = admitAddon(driver, "volumeGroup", CAPABILITY, { volume_group_id: req.volumeGroupId });
      const g = existing(state, req.volumeGroupId);
      const after = save(req.volumeGroupId, { ...g, volumeIds: req.volumeIds });
      return { volumeGroup: toProto(req.volumeGroupId, existing(after, req.volumeGroupId)) };
    }),
    // Idempotent, like every CSI delete: an absent group is already deleted.
    deleteVolumeGroup: unary(env, ControllerService.deleteVolumeGroup, DeleteVolumeGroupRequest, async (req) => {
      const state = admitAddon(driver, "volumeGroup", CAPABILITY, { volume_group_id: req.volumeGroupId });
      if (state.addons.groups[req.volumeGroupId]) save(req.volumeGroupId, undefined);
      return {};
    }),
    // One page, whatever max_entries says: a stub holds a handful of groups.
    listVolumeGroups: unary(env, ControllerService.listVolumeGroups, ListVolumeGroupsRequest, async () => {
      const state = admitAddon(driver, "volumeGroup", CAPABILITY);
      return { entries: Object.entries(state.addons.groups).map(([id, g]) => ({ volumeGroup: toProto(id, g) })), nextToken: "" };
    }),
    controllerGetVolumeGroup: unary(env, ControllerService.controllerGetVolumeGroup, ControllerGetVolumeGroupRequest, async (req) => {
      const state = admitAddon(driver, "volumeGroup", CAPABILITY, { volume_group_id: req.volumeGroupId });
      return { volumeGroup: toProto(req.volumeGroupId, existing(state, req.volumeGroupId)) };
    }),
  };
}

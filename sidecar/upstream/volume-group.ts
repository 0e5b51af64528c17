// proto.VolumeGroupController → volumegroup.Controller: names, ids and parameters as given, the
// named Secret's data as secrets (INTERNAL when it is missing, as upstream); the driver's
// VolumeGroup comes back with its members reduced to their volume ids.
import { ControllerService, type VolumeGroup as SpecGroup } from "../../proto/gen/volumegroup/volumegroup.js";
import type * as up from "../../proto/gen/proto/volumegroup.js";
import type { Next } from "../server/context.js";
import { NEEDS } from "./capabilities.js";
import { namedSecret } from "./named-secret.js";
import { relay, type UpstreamDeps, type Work } from "./relay.js";

const group = (g: SpecGroup | undefined): up.VolumeGroup | undefined =>
  g && { volumeGroupId: g.volumeGroupId, volumeGroupContext: g.volumeGroupContext, volumeIds: g.volumes.map((v) => v.volumeId) };

type Handlers = {
  [K in keyof typeof up.VolumeGroupControllerService]: Next<
    ReturnType<(typeof up.VolumeGroupControllerService)[K]["requestDeserialize"]>,
    ReturnType<(typeof up.VolumeGroupControllerService)[K]["responseDeserialize"]>
  >;
};

export function volumeGroupHandlers(deps: UpstreamDeps): Handlers {
  const serve =
    <Req extends { secretName: string; secretNamespace: string; volumeGroupId?: string }, Res>(
      work: (req: Req, secrets: Record<string, string>, w: Work) => Promise<Res>,
    ): Next<Req, Res> =>
    (req, ctx) =>
      relay(deps, ctx, NEEDS.volumeGroup, async (w) => {
        if (req.volumeGroupId) ctx.fields["volume_group_id"] = req.volumeGroupId;
        return work(req, await namedSecret(deps, ctx, req, "Internal", w.signal), w);
      });
  const { createVolumeGroup, modifyVolumeGroupMembership, deleteVolumeGroup, controllerGetVolumeGroup } = ControllerService;
  return {
    createVolumeGroup: serve(async (req, secrets, w) => {
      const request = { name: req.name, parameters: req.parameters, secrets, volumeIds: req.volumeIds };
      return { volumeGroup: group((await deps.driver.call(createVolumeGroup, request, w.deadline, w.signal)).volumeGroup) };
    }),
    modifyVolumeGroupMembership: serve(async (req, secrets, w) => {
      const request = { volumeGroupId: req.volumeGroupId, volumeIds: req.volumeIds, secrets, parameters: req.parameters };
      return { volumeGroup: group((await deps.driver.call(modifyVolumeGroupMembership, request, w.deadline, w.signal)).volumeGroup) };
    }),
    deleteVolumeGroup: serve(async (req, secrets, w) => {
      await deps.driver.call(deleteVolumeGroup, { volumeGroupId: req.volumeGroupId, secrets }, w.deadline, w.signal);
      return {};
    }),
    controllerGetVolumeGroup: serve(async (req, secrets, w) => {
      const res = await deps.driver.call(controllerGetVolumeGroup, { volumeGroupId: req.volumeGroupId, secrets }, w.deadline, w.signal);
      return { volumeGroup: group(res.volumeGroup) };
    }),
  };
}

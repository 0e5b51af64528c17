// proto.Replication → replication.Controller: replication_source (volume or group; the deprecated
// volume_id of older controllers names a volume), replication_id, force and parameters as given,
// the named Secret's data as secrets (INTERNAL when it is missing, as upstream).
import {
  ControllerService,
  type GetReplicationDestinationInfoResponse as SpecDestinationResponse,
  type ReplicationSource as SpecSource,
} from "../../proto/gen/replication/replication.js";
import type * as up from "../../proto/gen/proto/replication.js";
import type { MethodDef } from "../../common/grpc/call-error.js";
import { invalidArgument } from "../errors.js";
import type { CallContext, Next } from "../server/context.js";
import { NEEDS, type Need } from "./capabilities.js";
import { namedSecret } from "./named-secret.js";
import { relay, type UpstreamDeps, type Work } from "./relay.js";

interface Sourced {
  volumeId?: string;
  replicationSource?: up.ReplicationSource | undefined;
  secretName: string;
  secretNamespace: string;
}

/** The spec's source, and the volume id old drivers still read from volume_id. */
function sourceOf(req: Sourced, ctx: CallContext): { replicationSource: SpecSource; volumeId: string } {
  const t = req.replicationSource?.type;
  if (t?.$case === "volumeGroup" && t.volumeGroup.volumeGroupId !== "") {
    ctx.fields["volume_group_id"] = t.volumeGroup.volumeGroupId;
    return { replicationSource: { type: { $case: "volumegroup", volumegroup: { volumeGroupId: t.volumeGroup.volumeGroupId } } }, volumeId: "" };
  }
  const volumeId = t?.$case === "volume" ? t.volume.volumeId : (req.volumeId ?? "");
  if (volumeId === "") throw invalidArgument("replication_source (a volume or a volume group) is required");
  ctx.fields["volume_id"] = volumeId;
  return { replicationSource: { type: { $case: "volume", volume: { volumeId } } }, volumeId };
}

/** What every spec request of a source carries: the source, old drivers' volume_id, the secrets. */
type Base = ReturnType<typeof sourceOf> & { secrets: Record<string, string> };

function destination(res: SpecDestinationResponse): up.GetReplicationDestinationInfoResponse {
  const t = res.replicationDestination?.type;
  if (t?.$case === "volume") return { replicationDestination: { type: { $case: "volume", volume: { volumeId: t.volume.volumeId } } } };
  if (t?.$case === "volumegroup") {
    const { volumeGroupId, volumeIds } = t.volumegroup;
    return { replicationDestination: { type: { $case: "volumegroup", volumegroup: { volumeGroupId, volumeIds } } } };
  }
  return { replicationDestination: undefined };
}

type Handlers = {
  [K in keyof typeof up.ReplicationService]: Next<
    ReturnType<(typeof up.ReplicationService)[K]["requestDeserialize"]>,
    ReturnType<(typeof up.ReplicationService)[K]["responseDeserialize"]>
  >;
};

export function replicationHandlers(deps: UpstreamDeps): Handlers {
  /** Source, then secret (upstream reads the secret first; a bad source is the caller's mistake either way). */
  const serve =
    <Req extends Sourced, Res>(need: Need, work: (req: Req, base: Base, w: Work) => Promise<Res>): Next<Req, Res> =>
    (req, ctx) =>
      relay(deps, ctx, need, async (w) => {
        const source = sourceOf(req, ctx);
        const secrets = await namedSecret(deps, ctx, req, "Internal", w.signal);
        return work(req, { ...source, secrets }, w);
      });
  const call = <Req, Res>(def: MethodDef<Req, Res>, request: Req, w: Work) => deps.driver.call(def, request, w.deadline, w.signal);

  return {
    enableVolumeReplication: serve(NEEDS.replication, async (req, b, w) => {
      await call(ControllerService.enableVolumeReplication, { ...b, parameters: req.parameters, replicationId: req.replicationId }, w);
      return {};
    }),
    disableVolumeReplication: serve(NEEDS.replication, async (req, b, w) => {
      await call(ControllerService.disableVolumeReplication, { ...b, parameters: req.parameters, replicationId: req.replicationId }, w);
      return {};
    }),
    promoteVolume: serve(NEEDS.replication, async (req, b, w) => {
      await call(ControllerService.promoteVolume, { ...b, force: req.force, parameters: req.parameters, replicationId: req.replicationId }, w);
      return {};
    }),
    demoteVolume: serve(NEEDS.replication, async (req, b, w) => {
      await call(ControllerService.demoteVolume, { ...b, force: req.force, parameters: req.parameters, replicationId: req.replicationId }, w);
      return {};
    }),
    resyncVolume: serve(NEEDS.replication, async (req, b, w) => {
      const res = await call(ControllerService.resyncVolume, { ...b, force: req.force, parameters: req.parameters, replicationId: req.replicationId }, w);
      return { ready: res.ready };
    }),
    getVolumeReplicationInfo: serve(NEEDS.replication, async (req, b, w) => {
      const res = await call(ControllerService.getVolumeReplicationInfo, { ...b, replicationId: req.replicationId }, w);
      const { lastSyncTime, lastSyncDuration, lastSyncBytes, status, statusMessage } = res;
      return { lastSyncTime, lastSyncDuration, lastSyncBytes, status: status as number, statusMessage };
    }),
    getReplicationDestinationInfo: serve(NEEDS.destinationInfo, async (_req, b, w) => {
      const res = await call(ControllerService.getReplicationDestinationInfo, { replicationSource: b.replicationSource, secrets: b.secrets }, w);
      return destination(res);
    }),
  };
}

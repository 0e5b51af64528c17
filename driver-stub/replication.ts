// replication.Controller: per source ("volume:<id>" or "volumegroup:<id>") the state file keeps
// whether replication is enabled, the local role, resync count, destination id and last sync time.
import {
  ControllerService,
  DisableVolumeReplicationRequest,
  DemoteVolumeRequest,
  EnableVolumeReplicationRequest,
  GetReplicationDestinationInfoRequest,
  GetVolumeReplicationInfoRequest,
  GetVolumeReplicationInfoResponse_Status as ReplicationStatus,
  PromoteVolumeRequest,
  ResyncVolumeRequest,
  type ControllerServer,
  type ReplicationSource,
} from "../proto/gen/replication/replication.js";
import type { ReplicationSpec } from "./addons-state.js";
import { admitAddon, type Driver } from "./driver.js";
import type { CapabilityName } from "./state.js";
import { unary, type RpcEnv } from "./rpc.js";
import { Status, StatusError } from "./status.js";

interface Source {
  kind: "volume" | "volumegroup";
  id: string;
}

type SourceRequest = { volumeId?: string; replicationSource?: ReplicationSource | undefined };

/** replication_source, or the deprecated volume_id of older callers; id "" when neither is set. */
function sourceOf(req: SourceRequest): Source {
  const t = req.replicationSource?.type;
  if (t?.$case === "volume") return { kind: "volume", id: t.volume.volumeId };
  if (t?.$case === "volumegroup") return { kind: "volumegroup", id: t.volumegroup.volumeGroupId };
  return { kind: "volume", id: req.volumeId ?? "" };
}

const keyOf = (s: Source) => `${s.kind}:${s.id}`;

export function replicationServer(driver: Driver, env: RpcEnv): ControllerServer {
  const admit = (req: SourceRequest, capability: CapabilityName = "volumeReplication", name = "VolumeReplication VOLUME_REPLICATION") => {
    const source = sourceOf(req);
    return { source, state: admitAddon(driver, capability, name, { replication_source: source.id }) };
  };
  /** The entry of an enabled replication, or FAILED_PRECONDITION. */
  const enabled = (req: SourceRequest, capability?: CapabilityName, name?: string) => {
    const { source, state } = admit(req, capability, name);
    const entry = state.addons.replication[keyOf(source)];
    if (!entry?.enabled) throw new StatusError(Status.FAILED_PRECONDITION, `replication is not enabled for ${source.kind} ${source.id}`);
    return { source, entry };
  };
  const write = (source: Source, change: (e: ReplicationSpec) => ReplicationSpec) =>
    driver.store.update((raw) => {
      const key = keyOf(source);
      const next = { ...change(raw.replication?.[key] ?? {}), lastSyncTime: new Date().toISOString() };
      return { ...raw, replication: { ...raw.replication, [key]: next } };
    });

  return {
    enableVolumeReplication: unary(env, ControllerService.enableVolumeReplication, EnableVolumeReplicationRequest, async (req) => {
      const { source } = admit(req);
      write(source, (e) => ({ ...e, enabled: true, role: e.role ?? "primary" }));
      return {};
    }),
    disableVolumeReplication: unary(env, ControllerService.disableVolumeReplication, DisableVolumeReplicationRequest, async (req) => {
      const { source } = admit(req);
      write(source, (e) => ({ ...e, enabled: false }));
      return {};
    }),
    promoteVolume: unary(env, ControllerService.promoteVolume, PromoteVolumeRequest, async (req) => {
      write(enabled(req).source, (e) => ({ ...e, role: "primary" }));
      return {};
    }),
    demoteVolume: unary(env, ControllerService.demoteVolume, DemoteVolumeRequest, async (req) => {
      write(enabled(req).source, (e) => ({ ...e, role: "secondary" }));
      return {};
    }),
    resyncVolume: unary(env, ControllerService.resyncVolume, ResyncVolumeRequest, async (req) => {
      write(enabled(req).source, (e) => ({ ...e, resyncs: (e.resyncs ?? 0) + 1 }));
      return { ready: true };
    }),
    getVolumeReplicationInfo: unary(env, ControllerService.getVolumeReplicationInfo, GetVolumeReplicationInfoRequest, async (req) => {
      const { entry } = enabled(req);
      return {
        lastSyncTime: entry.lastSyncTime ? new Date(entry.lastSyncTime) : undefined,
        lastSyncDuration: undefined,
        lastSyncBytes: 0,
        status: ReplicationStatus.HEALTHY,
        statusMessage: `local role ${entry.role}`,
      };
    }),
    getReplicationDestinationInfo: unary(env, ControllerService.getReplicationDestinationInfo, GetReplicationDestinationInfoRequest, async (req) => {
      const { source, entry } = enabled(req, "replicationDestinationInfo", "VolumeReplication GET_REPLICATION_DESTINATION_INFO");
      const id = entry.destination || source.id;
      if (source.kind === "volume") return { replicationDestination: { type: { $case: "volume", volume: { volumeId: id } } } };
      const members = driver.store.current().addons.groups[source.id]?.volumeIds ?? [];
      return {
        replicationDestination: {
          type: { $case: "volumegroup", volumegroup: { volumeGroupId: id, volumeIds: Object.fromEntries(members.map((m) => [m, m])) } },
        },
      };
    }),
  };
}

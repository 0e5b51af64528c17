// The CSI-Addons identity service (identity.Identity) of the addons socket.
import {
  Capability,
  Capability_EncryptionKeyRotation_Type,
  Capability_NetworkFence_Type,
  Capability_ReclaimSpace_Type,
  Capability_Service_Type,
  Capability_VolumeGroup_Type,
  Capability_VolumeHealer_Type,
  Capability_VolumeReplication_Type,
  GetCapabilitiesRequest,
  GetIdentityRequest,
  IdentityService,
  ProbeRequest,
  type IdentityServer,
} from "../proto/gen/identity/identity.js";
import { identify, probe, type Driver } from "./driver.js";
import { unary, type RpcEnv } from "./rpc.js";
import type { CapabilityName } from "./state.js";

type Entry = NonNullable<Capability["type"]>;

/** What each state-file capability switch advertises. */
const ADVERTISED: Record<CapabilityName, Entry[]> = {
  getVolumeHealth: [{ $case: "volumeHealer", volumeHealer: { type: Capability_VolumeHealer_Type.GET_VOLUME_HEALTH } }],
  healVolume: [{ $case: "volumeHealer", volumeHealer: { type: Capability_VolumeHealer_Type.HEAL_VOLUME } }],
  reclaimSpaceOffline: [{ $case: "reclaimSpace", reclaimSpace: { type: Capability_ReclaimSpace_Type.OFFLINE } }],
  reclaimSpaceOnline: [{ $case: "reclaimSpace", reclaimSpace: { type: Capability_ReclaimSpace_Type.ONLINE } }],
  encryptionKeyRotation: [{ $case: "encryptionKeyRotation", encryptionKeyRotation: { type: Capability_EncryptionKeyRotation_Type.ENCRYPTIONKEYROTATION } }],
  networkFence: [{ $case: "networkFence", networkFence: { type: Capability_NetworkFence_Type.NETWORK_FENCE } }],
  getClientsToFence: [{ $case: "networkFence", networkFence: { type: Capability_NetworkFence_Type.GET_CLIENTS_TO_FENCE } }],
  volumeReplication: [{ $case: "volumeReplication", volumeReplication: { type: Capability_VolumeReplication_Type.VOLUME_REPLICATION } }],
  replicationDestinationInfo: [{ $case: "volumeReplication", volumeReplication: { type: Capability_VolumeReplication_Type.GET_REPLICATION_DESTINATION_INFO } }],
  volumeGroup: [
    Capability_VolumeGroup_Type.VOLUME_GROUP,
    Capability_VolumeGroup_Type.MODIFY_VOLUME_GROUP,
    Capability_VolumeGroup_Type.GET_VOLUME_GROUP,
    Capability_VolumeGroup_Type.LIST_VOLUME_GROUPS,
  ].map((type) => ({ $case: "volumeGroup", volumeGroup: { type } })),
  controllerService: [{ $case: "service", service: { type: Capability_Service_Type.CONTROLLER_SERVICE } }],
};

function capabilities(driver: Driver): Capability[] {
  const on = driver.store.current().capabilities;
  const entries: Entry[] = [{ $case: "service", service: { type: Capability_Service_Type.NODE_SERVICE } }];
  for (const [name, advertised] of Object.entries(ADVERTISED)) if (on[name as CapabilityName]) entries.push(...advertised);
  return entries.map((type) => ({ type }));
}

export function identityServer(driver: Driver, env: RpcEnv): IdentityServer {
  return {
    getIdentity: unary(env, IdentityService.getIdentity, GetIdentityRequest, async () => identify(driver.info)),
    getCapabilities: unary(env, IdentityService.getCapabilities, GetCapabilitiesRequest, async () => ({
      capabilities: capabilities(driver),
    })),
    probe: unary(env, IdentityService.probe, ProbeRequest, async () => probe(driver)),
  };
}

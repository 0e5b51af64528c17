// Which driver capability each upstream method needs. Without it the method answers UNIMPLEMENTED
// and the driver is never called: the upstream controller routes by these same capabilities, so a
// call without one is a misrouted call.
import {
  Capability_EncryptionKeyRotation_Type as KeyRotation,
  Capability_NetworkFence_Type as Fence,
  Capability_ReclaimSpace_Type as Reclaim,
  Capability_VolumeGroup_Type as Group,
  Capability_VolumeReplication_Type as Replication,
  type Capability,
} from "../../proto/gen/identity/identity.js";
import type { DriverInfo } from "../driver/connection.js";
import { unimplemented } from "../errors.js";

type Kind = Exclude<NonNullable<Capability["type"]>["$case"], "service" | "volumeHealer">;

export interface Need {
  kind: Kind;
  type: number;
  /** As the spec names it, for the error message. */
  label: string;
}

const need = (kind: Kind, type: number, label: string): Need => ({ kind, type, label });

export const NEEDS = {
  reclaimOffline: need("reclaimSpace", Reclaim.OFFLINE, "ReclaimSpace OFFLINE"),
  reclaimOnline: need("reclaimSpace", Reclaim.ONLINE, "ReclaimSpace ONLINE"),
  keyRotation: need("encryptionKeyRotation", KeyRotation.ENCRYPTIONKEYROTATION, "EncryptionKeyRotation ENCRYPTIONKEYROTATION"),
  fence: need("networkFence", Fence.NETWORK_FENCE, "NetworkFence NETWORK_FENCE"),
  fenceClients: need("networkFence", Fence.GET_CLIENTS_TO_FENCE, "NetworkFence GET_CLIENTS_TO_FENCE"),
  replication: need("volumeReplication", Replication.VOLUME_REPLICATION, "VolumeReplication VOLUME_REPLICATION"),
  destinationInfo: need("volumeReplication", Replication.GET_REPLICATION_DESTINATION_INFO, "VolumeReplication GET_REPLICATION_DESTINATION_INFO"),
  // The finer VolumeGroup capabilities (MODIFY_, GET_, LIST_VOLUME_GROUPS) are left to the driver
  // to enforce: the upstream sidecar forwards every group call once the service exists.
  volumeGroup: need("volumeGroup", Group.VOLUME_GROUP, "VolumeGroup VOLUME_GROUP"),
} as const;

export function offers(driver: DriverInfo, n: Need): boolean {
  return driver.capabilities.some((c) => {
    // Every capability message is { type: <its enum> } under its $case key.
    const t = c.type as unknown as ({ $case: string } & Record<string, { type?: number } | undefined>) | undefined;
    return t?.$case === n.kind && t[n.kind]?.type === n.type;
  });
}

export function requireCapability(driver: DriverInfo, n: Need): void {
  if (!offers(driver, n)) throw unimplemented(`driver ${driver.name} does not offer the ${n.label} capability`);
}

// The upstream csi-addons controller-facing services (DESIGN 8), as the gRPC server registers them:
// definition, handlers and the .proto reflection describes them from.
import type * as grpc from "@grpc/grpc-js";
import { EncryptionKeyRotationService } from "../../proto/gen/proto/encryptionkeyrotation.js";
import { NetworkFenceService } from "../../proto/gen/proto/networkfence.js";
import { ReclaimSpaceService } from "../../proto/gen/proto/reclaimspace.js";
import { ReplicationService } from "../../proto/gen/proto/replication.js";
import { VolumeGroupControllerService } from "../../proto/gen/proto/volumegroup.js";
import type { Next } from "../server/context.js";
import { encryptionKeyRotationHandlers } from "./encryption-key-rotation.js";
import { networkFenceHandlers } from "./network-fence.js";
import { reclaimSpaceHandlers } from "./reclaim-space.js";
import { replicationHandlers } from "./replication.js";
import type { UpstreamDeps } from "./relay.js";
import { volumeGroupHandlers } from "./volume-group.js";

export interface ServedService {
  /** Full service name, as reflection lists it. */
  name: string;
  definition: grpc.ServiceDefinition;
  /** By the definition's method keys. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- handlers of one service have different request and response types
  handlers: Record<string, Next<any, any>>;
  /** Relative to proto/. */
  protoFile: string;
}

export function upstreamServices(deps: UpstreamDeps): ServedService[] {
  const def = (d: object) => d as grpc.ServiceDefinition;
  return [
    { name: "proto.ReclaimSpace", definition: def(ReclaimSpaceService), handlers: reclaimSpaceHandlers(deps), protoFile: "proto/reclaimspace.proto" },
    {
      name: "proto.EncryptionKeyRotation",
      definition: def(EncryptionKeyRotationService),
      handlers: encryptionKeyRotationHandlers(deps),
      protoFile: "proto/encryptionkeyrotation.proto",
    },
    { name: "proto.NetworkFence", definition: def(NetworkFenceService), handlers: networkFenceHandlers(deps), protoFile: "proto/networkfence.proto" },
    { name: "proto.Replication", definition: def(ReplicationService), handlers: replicationHandlers(deps), protoFile: "proto/replication.proto" },
    {
      name: "proto.VolumeGroupController",
      definition: def(VolumeGroupControllerService),
      handlers: volumeGroupHandlers(deps),
      protoFile: "proto/volumegroup.proto",
    },
  ];
}

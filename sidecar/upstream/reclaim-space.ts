// proto.ReclaimSpace → reclaimspace.ReclaimSpaceController / ReclaimSpaceNode. Both resolve the PV
// (volumeHandle; volumeAttributes as parameters; nodeStageSecretRef, which upstream also uses for
// the controller call); the node call adds the kubelet's staging path and the volume capability.
import { ReclaimSpaceControllerService, ReclaimSpaceNodeService, type ControllerReclaimSpaceResponse } from "../../proto/gen/reclaimspace/reclaimspace.js";
import type { ReclaimSpaceRequest, ReclaimSpaceResponse } from "../../proto/gen/proto/reclaimspace.js";
import type { Next } from "../server/context.js";
import { NEEDS } from "./capabilities.js";
import { pvSecrets, resolvePv } from "./pv.js";
import { relay, type UpstreamDeps } from "./relay.js";

type Handler = Next<ReclaimSpaceRequest, ReclaimSpaceResponse>;

/** Same message shape on both sides; copied so only known fields cross. */
const usage = (r: ControllerReclaimSpaceResponse): ReclaimSpaceResponse => ({
  preUsage: r.preUsage && { usageBytes: r.preUsage.usageBytes },
  postUsage: r.postUsage && { usageBytes: r.postUsage.usageBytes },
});

export function reclaimSpaceHandlers(deps: UpstreamDeps): { controllerReclaimSpace: Handler; nodeReclaimSpace: Handler } {
  return {
    controllerReclaimSpace: (req, ctx) =>
      relay(deps, ctx, NEEDS.reclaimOffline, async (w) => {
        const vol = await resolvePv(deps, ctx, req.pvName, w);
        const request = { volumeId: vol.volumeId, parameters: vol.volumeContext, secrets: await pvSecrets(deps, vol, w.signal) };
        return usage(await deps.driver.call(ReclaimSpaceControllerService.controllerReclaimSpace, request, w.deadline, w.signal));
      }),
    nodeReclaimSpace: (req, ctx) =>
      relay(deps, ctx, NEEDS.reclaimOnline, async (w) => {
        const vol = await resolvePv(deps, ctx, req.pvName, w);
        const request = {
          volumeId: vol.volumeId,
          // Upstream leaves volume_path empty: the staged volume is what gets trimmed.
          volumePath: "",
          stagingTargetPath: vol.stagingTargetPath,
          volumeCapability: vol.capability,
          secrets: await pvSecrets(deps, vol, w.signal),
        };
        return usage(await deps.driver.call(ReclaimSpaceNodeService.nodeReclaimSpace, request, w.deadline, w.signal));
      }),
  };
}

// proto.EncryptionKeyRotation → encryptionkeyrotation.EncryptionKeyRotationController: the PV's
// handle, volumeAttributes as parameters, its volume capability and stage secrets, as upstream.
import { EncryptionKeyRotationControllerService } from "../../proto/gen/encryptionkeyrotation/encryptionkeyrotation.js";
import type { EncryptionKeyRotateRequest, EncryptionKeyRotateResponse } from "../../proto/gen/proto/encryptionkeyrotation.js";
import type { Next } from "../server/context.js";
import { NEEDS } from "./capabilities.js";
import { pvSecrets, resolvePv } from "./pv.js";
import { relay, type UpstreamDeps } from "./relay.js";

export function encryptionKeyRotationHandlers(deps: UpstreamDeps): { encryptionKeyRotate: Next<EncryptionKeyRotateRequest, EncryptionKeyRotateResponse> } {
  return {
    encryptionKeyRotate: (req, ctx) =>
      relay(deps, ctx, NEEDS.keyRotation, async (w) => {
        const vol = await resolvePv(deps, ctx, req.pvName, w);
        const request = {
          volumeId: vol.volumeId,
          volumePath: "",
          // The driver chooses the new key (from its KMS); nobody passes key material through us.
          encryptionKey: "",
          parameters: vol.volumeContext,
          secrets: await pvSecrets(deps, vol, w.signal),
          volumeCapability: vol.capability,
        };
        await deps.driver.call(EncryptionKeyRotationControllerService.encryptionKeyRotate, request, w.deadline, w.signal);
        return {};
      }),
  };
}

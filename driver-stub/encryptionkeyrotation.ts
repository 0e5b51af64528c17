// encryptionkeyrotation.EncryptionKeyRotationController: counts rotations per volume in the state file.
import {
  EncryptionKeyRotateRequest,
  EncryptionKeyRotationControllerService,
  type EncryptionKeyRotationControllerServer,
} from "../proto/gen/encryptionkeyrotation/encryptionkeyrotation.js";
import { secretDigest } from "./call-log.js";
import { admitAddon, type Driver } from "./driver.js";
import { unary, type RpcEnv } from "./rpc.js";

// encryption_key is a csi_secret field outside any `secrets` map, which the call log's redaction
// does not know about: log its digest, like every secret value, before the log sees the request.
const loggedRequest = {
  toJSON: (m: EncryptionKeyRotateRequest) => ({
    ...(EncryptionKeyRotateRequest.toJSON(m) as object),
    ...(m.encryptionKey !== "" && { encryptionKey: secretDigest(m.encryptionKey) }),
  }),
};

export function encryptionKeyRotationServer(driver: Driver, env: RpcEnv): EncryptionKeyRotationControllerServer {
  return {
    encryptionKeyRotate: unary(env, EncryptionKeyRotationControllerService.encryptionKeyRotate, loggedRequest, async (req) => {
      admitAddon(driver, "encryptionKeyRotation", "EncryptionKeyRotation ENCRYPTIONKEYROTATION", { volume_id: req.volumeId });
      driver.store.update((raw) => ({ ...raw, keyRotations: { ...raw.keyRotations, [req.volumeId]: (raw.keyRotations?.[req.volumeId] ?? 0) + 1 } }));
      return {};
    }),
  };
}

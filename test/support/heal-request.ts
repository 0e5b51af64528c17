// The reason a test's heal gives, as the controller would for its mode: a check-first heal heals
// what its check found broken, an unconditional one follows a driver restart.
import { HealReason } from "../../proto/gen/healer/v1/healer.js";
import { HealVolumeRequest_Mode as Mode } from "../../proto/gen/sidecar/v1/healer.js";

export const reasonFor = (mode: Mode): HealReason => (mode === Mode.IF_ABNORMAL ? HealReason.VOLUME_ABNORMAL : HealReason.DRIVER_RESTARTED);

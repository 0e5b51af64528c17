// What the image runs, so that the bench measures the same thing: the bundled sidecar (npm run
// bundle) under the V8 flags deploy/ gives the sidecar container (NODE_OPTIONS in its manifest:
// heap caps; --max-semi-space-size bounds the young generation, which V8 otherwise grows to
// 2 x 16 MiB under load and keeps committed).
import { readDeployLimits } from "./deploy-limits.js";

export const SIDECAR_BUNDLE = "dist/csi-addons-sidecar.mjs";
export const SIDECAR_NODE_FLAGS: readonly string[] = readDeployLimits().nodeOptions.split(/\s+/).filter(Boolean);

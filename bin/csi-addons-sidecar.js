#!/usr/bin/env node
// The bundled sidecar (npm run bundle), what the image runs: one module, and the chunks it loads
// only when needed (the self-signed certificate generator, gRPC reflection, the YAML parser).
import "../dist/csi-addons-sidecar.mjs";

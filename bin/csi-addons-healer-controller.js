#!/usr/bin/env node
// The bundled healer controller (npm run bundle), what the image runs: one module, no node_modules.
import "../dist/csi-addons-healer-controller.mjs";

#!/usr/bin/env node
// The bundled sidecar (npm run bundle): one file to load, what the image runs.
import "../dist/csi-addons-sidecar.mjs";

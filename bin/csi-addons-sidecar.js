#!/usr/bin/env node
// The bundled sidecar (npm run bundle), what the image runs: one module, and the chunks it loads
// only when needed (the self-signed certificate generator, gRPC reflection, the YAML parser).
// Its V8 heap caps unless NODE_OPTIONS or the command line gives them (heap-defaults.js): the
// values deploy/'s DaemonSets set. Loaded after, so a start that is replaced never reads it.
import { applyHeapDefaults } from "./heap-defaults.js";

const HEAP_DEFAULTS = ["--max-old-space-size=96", "--max-semi-space-size=2"];
applyHeapDefaults(HEAP_DEFAULTS);
await import("../dist/csi-addons-sidecar.mjs");

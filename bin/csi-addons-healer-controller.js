#!/usr/bin/env node
// The bundled healer controller (npm run bundle), what the image runs: one module, no node_modules.
// Its V8 heap caps unless NODE_OPTIONS or the command line gives them (heap-defaults.js): the
// values deploy/'s Deployment sets. Loaded after, so a start that is replaced never reads it.
import { applyHeapDefaults } from "./heap-defaults.js";

const HEAP_DEFAULTS = ["--max-old-space-size=192", "--max-semi-space-size=4"];
applyHeapDefaults(HEAP_DEFAULTS);
await import("../dist/csi-addons-healer-controller.mjs");

// Types of what scripts/bundle.mjs lends to TypeScript callers (the bench bundles its grpc-js relay with it).
import type { BuildOptions } from "esbuild";

export declare const BUNDLE_OPTIONS: BuildOptions;

// The bench measures the compiled programs (what the image runs: the sidecar as its bundle), so
// dist/ must match the sources: scripts/build-fresh.mjs rebuilds whatever is older than a source.
import { buildStale } from "../../scripts/build-fresh.mjs";
import { CONTROLLER_BUNDLE, SIDECAR_BUNDLE } from "./image.js";

/** What the bench runs as the sidecar and the controller: their bundles, as the image does. */
export const COMPILED_SIDECAR = SIDECAR_BUNDLE;
export const COMPILED_DRIVER_STUB = "dist/driver-stub/main.js";
export const COMPILED_CONTROLLER = CONTROLLER_BUNDLE;

/** Builds when one of `entries` is missing or older than a source; returns why it built (or that it did not have to). */
export function ensureCompiled(log: (line: string) => void, entries: string[] = [COMPILED_SIDECAR, COMPILED_DRIVER_STUB]): string {
  return buildStale(log, entries);
}

// What the image runs, so that the bench measures the same thing: the bundled sidecar and controller
// (npm run bundle) under the V8 flags deploy/ gives each container (NODE_OPTIONS in its manifest:
// heap caps; --max-semi-space-size bounds the young generation, which V8 otherwise grows to
// 2 x 16 MiB under load and keeps committed), in the environment the Dockerfile's sidecar stage
// sets (NODE_ENV=production, which some dependencies read; the compile cache the image carries).
import { spawnSync } from "node:child_process";
import { cpSync } from "node:fs";
import { join } from "node:path";
import { DOCKERFILE, readStages } from "../support/deploy/dockerfile.js";
import { repoRoot, tempDir } from "../support/proc.js";
import { readDeployLimits } from "./deploy-limits.js";

export const SIDECAR_BUNDLE = "dist/csi-addons-sidecar.mjs";
export const CONTROLLER_BUNDLE = "dist/csi-addons-healer-controller.mjs";
export const SIDECAR_NODE_FLAGS: readonly string[] = readDeployLimits("sidecar").nodeOptions.split(/\s+/).filter(Boolean);
/** The V8 flags deploy/ gives the healer controller's container. */
export const CONTROLLER_NODE_FLAGS: readonly string[] = readDeployLimits("controller").nodeOptions.split(/\s+/).filter(Boolean);

/**
 * The sidecar image's ENTRYPOINT script as a path in the repository (the image's /app is laid out
 * as the repository is), run with no V8 flags of its own, as the ENTRYPOINT runs it.
 */
export const IMAGE_ENTRY_SCRIPT: string = (() => {
  const entry = readStages(DOCKERFILE).at(-1)!.steps.filter((s) => s.op === "ENTRYPOINT").at(-1);
  const script = entry ? (JSON.parse(entry.args) as string[]).find((a) => a.startsWith("/app/")) : undefined;
  if (!script) throw new Error("the Dockerfile's sidecar stage has no ENTRYPOINT running a script under /app");
  return script.slice("/app/".length);
})();

/** The sidecar stage's ENV instructions (the last stage is the sidecar image). */
const IMAGE_ENV: Readonly<Record<string, string>> = Object.fromEntries(
  readStages(DOCKERFILE)
    .at(-1)!
    .steps.filter((s) => s.op === "ENV")
    .map((s) => {
      const eq = s.args.indexOf("=");
      return [s.args.slice(0, eq), s.args.slice(eq + 1)];
    }),
);

/**
 * The image's environment for one sidecar whose files go beside `logFile`; its compile cache (if
 * the image has one) is a fresh copy of a cache made as the image makes its own.
 */
export function imageEnv(logFile: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...IMAGE_ENV };
  if (env["NODE_COMPILE_CACHE"] !== undefined) env["NODE_COMPILE_CACHE"] = imageCompileCache(`${logFile}.compile-cache`);
  return env;
}

let primed: string | undefined;

/**
 * A NODE_COMPILE_CACHE folder at `into`, as the image has it: made by one `--version` run (the
 * Dockerfile's compile-cache stage), then copied afresh for each sidecar. A sidecar that exits adds
 * what it compiled meanwhile, and the next one would start with more than the image gives it.
 */
export function imageCompileCache(into: string): string {
  if (primed === undefined) {
    const dir = tempDir("compile-cache-");
    const r = spawnSync(process.execPath, [...SIDECAR_NODE_FLAGS, join(repoRoot, SIDECAR_BUNDLE), "--version"], {
      encoding: "utf8",
      env: { ...process.env, ...IMAGE_ENV, NODE_COMPILE_CACHE: dir },
    });
    if (r.status !== 0) throw new Error(`priming the compile cache: ${SIDECAR_BUNDLE} --version exited ${r.status ?? r.signal}: ${r.stderr}`);
    primed = dir;
  }
  cpSync(primed, into, { recursive: true });
  return into;
}

// The bench measures the compiled programs (what the image runs: the sidecar as its bundle), so
// dist/ must match the sources: rebuild with `npm run build` (tsc and the bundle) when any source is
// newer than a compiled entry point it needs.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../support/proc.js";
import { CONTROLLER_BUNDLE, SIDECAR_BUNDLE } from "./image.js";

/** What the bench runs as the sidecar and the controller: their bundles, as the image does. */
export const COMPILED_SIDECAR = SIDECAR_BUNDLE;
export const COMPILED_DRIVER_STUB = "dist/driver-stub/main.js";
export const COMPILED_CONTROLLER = CONTROLLER_BUNDLE;
/** Source folders that end up in dist/ (those that exist: controller/ and common/ are newer). */
const SOURCES = ["sidecar", "driver-stub", "controller", "common", "proto/gen"];

function newestSource(dirs: string[]): { file: string; mtimeMs: number } {
  let newest = { file: "", mtimeMs: 0 };
  for (const dir of dirs) {
    if (!existsSync(join(repoRoot, dir))) continue;
    for (const f of readdirSync(join(repoRoot, dir), { recursive: true }) as string[]) {
      if (!f.endsWith(".ts")) continue;
      const file = join(dir, f);
      const mtimeMs = statSync(join(repoRoot, file)).mtimeMs;
      if (mtimeMs > newest.mtimeMs) newest = { file, mtimeMs };
    }
  }
  return newest;
}

function mtime(file: string): number | undefined {
  try {
    return statSync(join(repoRoot, file)).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Builds when one of `entries` is missing or older than a source; returns why it built (or that it did not have to). */
export function ensureCompiled(log: (line: string) => void, entries: string[] = [COMPILED_SIDECAR, COMPILED_DRIVER_STUB]): string {
  const newest = newestSource(SOURCES);
  const stale = entries.map((e) => ({ e, built: mtime(e) })).find(({ built }) => built === undefined || built < newest.mtimeMs);
  if (stale === undefined) return `${entries.join(", ")} up to date`;
  const why = stale.built === undefined ? `${stale.e} is missing` : `${newest.file} is newer than ${stale.e}`;
  log(`${why}: npm run build ...`);
  const r = spawnSync("npm", ["run", "--silent", "build"], { cwd: repoRoot, stdio: ["ignore", 2, 2] });
  if (r.status !== 0) throw new Error(`npm run build failed (exit ${r.status ?? r.signal})`);
  const missing = entries.filter((e) => mtime(e) === undefined);
  if (missing.length > 0) throw new Error(`npm run build did not produce ${missing.join(", ")} (is its folder in tsconfig.build.json?)`);
  return `${why}; rebuilt with npm run build`;
}

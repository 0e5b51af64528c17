// The bench measures the compiled sidecar (what the image runs), so dist/ must match the sources:
// rebuild with `npm run build` when any source is newer than the bundle.
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../support/proc.js";
import { SIDECAR_BUNDLE } from "./image.js";

/** What the bench runs: the bundle, as the image does. */
export const COMPILED_SIDECAR = SIDECAR_BUNDLE;

function newestSource(dirs: string[]): { file: string; mtimeMs: number } {
  let newest = { file: "", mtimeMs: 0 };
  for (const dir of dirs) {
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

/** Builds when needed; returns why it built (or that it did not have to). */
export function ensureCompiledSidecar(log: (line: string) => void): string {
  const built = mtime(COMPILED_SIDECAR);
  const newest = newestSource(["sidecar", "proto/gen"]);
  if (built !== undefined && built >= newest.mtimeMs) return `${COMPILED_SIDECAR} is up to date`;
  const why = built === undefined ? `${COMPILED_SIDECAR} is missing` : `${newest.file} is newer than ${COMPILED_SIDECAR}`;
  log(`${why}: npm run build ...`);
  const r = spawnSync("npm", ["run", "--silent", "build"], { cwd: repoRoot, stdio: ["ignore", 2, 2] });
  if (r.status !== 0) throw new Error(`npm run build failed (exit ${r.status ?? r.signal})`);
  return `${why}; rebuilt with npm run build`;
}

// Whether the built programs in dist/ match their sources, and building those that do not: the
// integration tests and the bench start what ships (the bundles, the driver-stub's tsc output),
// so a stale dist/ would test old code. `npm test` builds what is stale once before any test
// starts; test/support/proc.ts refuses to start a stale program (a test file run on its own).
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;

/** Each build: what it writes, the sources it reads (folders or files), and the command that makes it. */
export const BUILDS = [
  {
    outputs: ["dist/csi-addons-sidecar.mjs", "dist/csi-addons-healer-controller.mjs"],
    sources: ["sidecar", "controller", "common", "proto/gen", "scripts/bundle.mjs", "package-lock.json"],
    command: [process.execPath, join(root, "scripts/bundle.mjs")],
  },
  {
    outputs: ["dist/driver-stub/main.js"],
    sources: ["driver-stub", "common", "proto/gen", "tsconfig.build.json"],
    command: [process.execPath, join(root, "node_modules/typescript/bin/tsc"), "-p", join(root, "tsconfig.build.json")],
  },
];

function newest(paths) {
  let found = { file: "", mtimeMs: 0 };
  const consider = (file) => {
    const mtimeMs = statSync(join(root, file)).mtimeMs;
    if (mtimeMs > found.mtimeMs) found = { file, mtimeMs };
  };
  for (const p of paths) {
    if (!existsSync(join(root, p))) continue;
    if (!statSync(join(root, p)).isDirectory()) consider(p);
    else for (const f of readdirSync(join(root, p), { recursive: true })) if (String(f).endsWith(".ts")) consider(join(p, String(f)));
  }
  return found;
}

const mtime = (file) => (existsSync(join(root, file)) ? statSync(join(root, file)).mtimeMs : undefined);

/** The builds of `outputs` (all when not given) that are missing or older than a source, each with why. */
export function staleBuilds(outputs) {
  const stale = [];
  for (const b of BUILDS) {
    const wanted = outputs === undefined ? b.outputs : b.outputs.filter((o) => outputs.includes(o));
    if (wanted.length === 0) continue;
    const source = newest(b.sources);
    const old = wanted.map((o) => ({ o, built: mtime(o) })).find(({ built }) => built === undefined || built < source.mtimeMs);
    if (old) stale.push({ build: b, why: old.built === undefined ? `${old.o} is missing` : `${source.file} is newer than ${old.o}` });
  }
  return stale;
}

/** Builds what is stale among `outputs` (all when not given); returns what it did, for a log line. */
export function buildStale(log, outputs) {
  const stale = staleBuilds(outputs);
  if (stale.length === 0) return `${(outputs ?? BUILDS.flatMap((b) => b.outputs)).join(", ")} up to date`;
  for (const { build, why } of stale) {
    log(
      `${why}: ${build.command
        .slice(1)
        .map((a) => a.replace(root, ""))
        .join(" ")} ...`,
    );
    const r = spawnSync(build.command[0], build.command.slice(1), { cwd: root, stdio: ["ignore", 2, 2] });
    if (r.status !== 0) throw new Error(`building ${build.outputs.join(", ")} failed (exit ${r.status ?? r.signal})`);
    const missing = build.outputs.filter((o) => mtime(o) === undefined);
    if (missing.length > 0) throw new Error(`the build did not produce ${missing.join(", ")}`);
  }
  return `${stale.map((s) => s.why).join("; ")}: rebuilt`;
}

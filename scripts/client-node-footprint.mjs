// Measures what @kubernetes/client-node would cost the sidecar, as installed (whatever version the
// lock file holds, or the copy in `--package DIR`, e.g. a scratch `npm install @kubernetes/client-node@2`)
// and as one esbuild bundle tree-shaken to the APIs the sidecar needs. It decides
// whether the sidecar may drop its own small REST transport (sidecar/kube/transport.ts); see the
// docs/decisions/sidecar-kubernetes-transport.md. Run: `npm run -s client-node-footprint` (a few seconds; not part of tests).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const root = new URL("..", import.meta.url).pathname;
const runs = 3;
const at = process.argv.indexOf("--package");
const pkgDir = at > 0 ? process.argv[at + 1] : join(root, "node_modules/@kubernetes/client-node");
const pkgMain = join(pkgDir, JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")).main ?? "dist/index.js");
const dir = mkdtempSync(join(tmpdir(), "cn-footprint-"));
try {
  const probe = join(dir, "probe.mjs");
  // One KubeConfig and one API client: what the sidecar would build at start.
  writeFileSync(
    probe,
    `const t0 = performance.now(); const before = process.memoryUsage().rss;
const k = await import(process.argv[2]);
const kc = new k.KubeConfig();
kc.loadFromOptions({ clusters: [{ name: "c", server: "https://127.0.0.1:1" }], users: [{ name: "u", token: "t" }],
  contexts: [{ name: "x", cluster: "c", user: "u" }], currentContext: "x" });
kc.makeApiClient(k.CoreV1Api);
globalThis.gc();
console.log(JSON.stringify({ ms: performance.now() - t0, mib: (process.memoryUsage().rss - before) / 1048576, rss: process.memoryUsage().rss / 1048576 }));`,
  );
  const entry = join(dir, "entry.mjs");
  writeFileSync(
    entry,
    `export { KubeConfig, CoreV1Api, CustomObjectsApi, AuthenticationV1Api, AuthorizationV1Api, CoordinationV1Api, StorageV1Api, Watch } from ${JSON.stringify(pkgMain)};`,
  );
  const bundle = join(dir, "bundle.mjs");
  execFileSync(join(root, "node_modules/.bin/esbuild"), [
    entry,
    "--bundle",
    "--platform=node",
    "--format=esm",
    "--minify",
    "--log-level=error",
    `--outfile=${bundle}`,
    "--banner:js=import{createRequire}from'module';const require=createRequire(import.meta.url);",
  ]);
  const bare = join(dir, "bare.mjs");
  writeFileSync(bare, `globalThis.gc(); console.log(JSON.stringify({ rss: process.memoryUsage().rss / 1048576 }));`);
  const measure = (args) => JSON.parse(execFileSync(process.execPath, ["--expose-gc", ...args], { cwd: root }).toString());
  const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const version = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")).version;
  const rows = [
    ["bare Node", Array.from({ length: runs }, () => measure([bare]))],
    [`client-node ${version}`, Array.from({ length: runs }, () => measure([probe, pathToFileURL(pkgMain).href]))],
    [`client-node ${version}, bundled`, Array.from({ length: runs }, () => measure([probe, pathToFileURL(bundle).href]))],
  ];
  console.log(`Node ${process.version}, median of ${runs} runs`);
  console.log("what                               import ms   +RSS MiB   RSS MiB");
  for (const [name, rs] of rows) {
    const ms = rs[0].ms === undefined ? "-" : median(rs.map((r) => r.ms)).toFixed(0);
    const mib = rs[0].mib === undefined ? "-" : median(rs.map((r) => r.mib)).toFixed(1);
    console.log(
      `${name.padEnd(34)} ${ms.padStart(9)} ${mib.padStart(10)} ${median(rs.map((r) => r.rss))
        .toFixed(1)
        .padStart(9)}`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

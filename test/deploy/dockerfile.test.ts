// The Dockerfile cannot be built here (no registry for base images), so these checks read it:
// what it copies exists and passes .dockerignore, the runtime image has what the code loads
// (production dependencies only), and it agrees with the example DaemonSet.
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, normalize, relative, resolve } from "node:path";
import { describe, test } from "node:test";
import ts from "typescript";
import { findOne, loadManifests, repoRoot } from "./load.js";
import { SIDECAR_BUNDLE, SIDECAR_NODE_FLAGS } from "../bench/image.js";

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  from: string;
  name?: string;
  steps: Instruction[];
}

/** Dockerfile instructions by stage: comments dropped, continuation lines joined. */
function readStages(text: string): Stage[] {
  const lines = text.split("\n").filter((l) => !/^\s*#/.test(l));
  const joined = lines.join("\n").replace(/\\\n/g, " ");
  const stages: Stage[] = [];
  for (const line of joined.split("\n")) {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const op = m[1].toUpperCase();
    if (op === "FROM") {
      const [, from, name] = /^(\S+)(?:\s+AS\s+(\S+))?/i.exec(m[2].trim())!;
      stages.push({ from, name, steps: [] });
    } else if (stages.length > 0) {
      stages.at(-1)!.steps.push({ op, args: m[2].trim() });
    }
  }
  return stages;
}

/** Whether .dockerignore keeps `path` out of the build context (the last matching pattern wins). */
function ignored(path: string, patterns: string[]): boolean {
  let out = false;
  const parts = path.split("/");
  const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join("/"));
  for (const raw of patterns) {
    const negate = raw.startsWith("!");
    const pattern = (negate ? raw.slice(1) : raw).replace(/\/+$/, "");
    const re = new RegExp(
      `^${pattern
        .split(/(\*\*\/|\*)/)
        .map((p) => (p === "**/" ? "(?:.*/)?" : p === "*" ? "[^/]*" : p.replace(/[.+?^${}()|[\]\\]/g, "\\$&")))
        .join("")}$`,
    );
    // A pattern that matches a folder matches everything in it.
    if (prefixes.some((p) => re.test(p))) out = !negate;
  }
  return out;
}

/** Package names that production code (sidecar/, driver-stub/, proto/gen) loads at run time. */
function runtimeImports(): Map<string, string> {
  const found = new Map<string, string>();
  const walk = (dir: string): string[] =>
    readdirSync(join(repoRoot, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
    );
  for (const file of ["sidecar", "driver-stub", "proto/gen"].flatMap(walk)) {
    const source = ts.createSourceFile(file, readFileSync(join(repoRoot, file), "utf8"), ts.ScriptTarget.ES2022, true);
    const visit = (node: ts.Node): void => {
      let spec: ts.Expression | undefined;
      if (ts.isImportDeclaration(node) && !node.importClause?.isTypeOnly) spec = node.moduleSpecifier;
      else if (ts.isExportDeclaration(node) && !node.isTypeOnly) spec = node.moduleSpecifier;
      else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) spec = node.arguments[0];
      if (spec && ts.isStringLiteral(spec)) found.set(spec.text, found.get(spec.text) ?? file);
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

const dockerfile = readFileSync(join(repoRoot, "Dockerfile"), "utf8");
const stages = readStages(dockerfile);
const runtime = stages.at(-1)!;
const dockerignore = readFileSync(join(repoRoot, ".dockerignore"), "utf8")
  .split("\n")
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith("#"));
const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
  bin: Record<string, string>;
  dependencies: Record<string, string>;
};
const step = (stage: Stage, op: string) => stage.steps.filter((s) => s.op === op).map((s) => s.args);

describe("Dockerfile", () => {
  test("the build stage bundles the sidecar (npm run build runs scripts/bundle.mjs, which it copies)", () => {
    const build = stages.find((st) => step(st, "RUN").some((r) => /\bnpm run build\b/.test(r)));
    assert.ok(build, "a stage runs npm run build");
    const scripts = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
    assert.match(scripts["build"]!, /node scripts\/bundle\.mjs/);
    assert.ok(readFileSync(join(repoRoot, "scripts/bundle.mjs"), "utf8").includes(`"${SIDECAR_BUNDLE}"`), `scripts/bundle.mjs writes ${SIDECAR_BUNDLE}`);
    const runIndex = build.steps.findIndex((st) => st.op === "RUN" && /\bnpm run build\b/.test(st.args));
    assert.ok(build.steps.slice(0, runIndex).some((st) => st.op === "COPY" && /^scripts\/(bundle\.mjs)?\s/.test(st.args)), "scripts/bundle.mjs is copied before the build");
    const install = step(build, "RUN").find((r) => /\bnpm ci\b/.test(r))!;
    assert.doesNotMatch(install, /--omit=optional/, "esbuild's platform binary is an optional dependency");
  });

  test("multi-stage, Node 20, the runtime stage copies from the others and installs nothing", () => {
    assert.ok(stages.length >= 2);
    const arg = /^ARG NODE_IMAGE=(\S+)$/m.exec(dockerfile)?.[1];
    for (const s of stages) assert.match(s.from === "${NODE_IMAGE}" ? arg ?? "" : s.from, /^node:20-|nodejs20/);
    assert.deepEqual(step(runtime, "RUN").filter((r) => /\b(npm|npx|yarn)\s+\w/.test(r)), []);
    const copies = step(runtime, "COPY");
    assert.ok(copies.length > 0 && copies.every((c) => c.startsWith("--from=")), "the runtime stage copies only from build stages");
  });

  test("production dependencies only, without install scripts", () => {
    const installs = stages.flatMap((s) => step(s, "RUN")).filter((r) => /\bnpm (ci|install|i)\b/.test(r));
    assert.ok(installs.every((r) => /\bnpm ci\b/.test(r) && r.includes("--ignore-scripts")), installs.join("\n"));
    const deps = stages.find((s) => step(s, "RUN").some((r) => r.includes("--omit=dev")));
    assert.ok(deps?.name, "a stage installs with --omit=dev");
    assert.ok(step(runtime, "COPY").some((c) => c.startsWith(`--from=${deps.name} `) && c.includes("node_modules")));
  });

  test("production code imports only Node built-ins, dependencies and its own files", () => {
    for (const [spec, file] of runtimeImports()) {
      if (spec.startsWith("node:")) continue;
      if (spec.startsWith(".")) {
        const target = relative(repoRoot, resolve(dirname(join(repoRoot, file)), spec));
        assert.ok(!target.startsWith("test/") && !target.startsWith(".."), `${file} imports ${spec} (outside the image)`);
        continue;
      }
      const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0];
      assert.ok(name in pkg.dependencies, `${file} imports ${spec}, which is not a production dependency`);
    }
  });

  test("everything copied from the context exists and passes .dockerignore", () => {
    const sources = stages.flatMap((s) => step(s, "COPY")).filter((c) => !c.startsWith("--from="))
      .flatMap((c) => c.split(/\s+/).slice(0, -1));
    assert.ok(sources.length > 0);
    for (const src of sources) {
      const path = normalize(src).replace(/\/$/, "");
      assert.ok(existsSync(join(repoRoot, path)), `${src} does not exist`);
      assert.ok(!ignored(path, dockerignore), `${src} is excluded by .dockerignore`);
    }
    const tsconfig = JSON.parse(readFileSync(join(repoRoot, "tsconfig.build.json"), "utf8")) as { include: string[] };
    for (const dir of tsconfig.include) {
      assert.ok(sources.some((s) => dir === normalize(s).replace(/\/$/, "") || dir.startsWith(normalize(s))), `${dir} is compiled but not copied`);
    }
    for (const kept of ["node_modules", "dist", "test", ".git", "deploy", "node_modules/x", "sidecar/node_modules"]) {
      assert.ok(ignored(kept, dockerignore), `${kept} reaches the build context`);
    }
  });

  test("the entrypoint is the sidecar's bin, run as the user the DaemonSet expects", () => {
    const workdir = step(runtime, "WORKDIR").at(-1)!;
    const entry = JSON.parse(step(runtime, "ENTRYPOINT").at(-1)!) as string[];
    assert.equal(entry[0], "node");
    assert.deepEqual(entry.slice(1, -1), SIDECAR_NODE_FLAGS, "the V8 flags the bench measures");
    assert.equal(relative(workdir, entry.at(-1)!), normalize(pkg.bin["csi-addons-sidecar"]));
    const bin = readFileSync(join(repoRoot, pkg.bin["csi-addons-sidecar"]), "utf8");
    assert.ok(bin.includes(`../${SIDECAR_BUNDLE}`), "the bin runs the bundled sidecar");
    assert.ok(existsSync(join(repoRoot, "sidecar/main.ts")));

    const user = step(runtime, "USER").at(-1)!.split(":");
    const ds = findOne(loadManifests(), "DaemonSet") as unknown as {
      spec: { template: { spec: { securityContext: { fsGroup: number }; containers: { name: string; command?: string[]; securityContext: { runAsUser: number; runAsGroup?: number } }[] } } };
    };
    const pod = ds.spec.template.spec;
    const sidecar = pod.containers.find((c) => c.name === "csi-addons-healer")!;
    assert.equal(Number(user[0]), sidecar.securityContext.runAsUser);
    assert.equal(Number(user[1]), sidecar.securityContext.runAsGroup);
    assert.equal(Number(user[1]), pod.securityContext.fsGroup);
    // The driver container starts the other bin of the same image.
    const driver = pod.containers.find((c) => c.name === "driver")!;
    assert.ok(driver.command?.join(" ").includes(join(workdir, pkg.bin["csi-addons-driver-stub"])), "driver command");
  });

  test("the .dockerignore matcher behaves like Docker's on the cases above", () => {
    const p = ["*", "!bin", "**/node_modules"];
    assert.equal(ignored("bin", p), false);
    assert.equal(ignored("bin/x.js", p), false);
    assert.equal(ignored("bin/node_modules/y", p), true);
    assert.equal(ignored("test/a.ts", p), true);
    assert.equal(ignored("x", []), false);
  });
});

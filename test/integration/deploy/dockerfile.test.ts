// The Dockerfile cannot be built here (no registry for base images), so these checks read it:
// what it copies exists and passes .dockerignore, the sidecar image has the two bundles and no
// node_modules, and nothing of the driver-stub, both final stages carry OCI
// labels, and it agrees with the example DaemonSet. scripts/build-image.sh runs against a stand-in
// `docker` that records its calls.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, normalize, relative, resolve } from "node:path";
import { describe, test } from "node:test";
import ts from "typescript";
import { tempDir } from "../../support/proc.js";
import { findOne, noKubectl, readKustomization, render, repoRoot } from "../../support/deploy/load.js";
import { controllerCommand } from "../../bench/deploy-limits.js";
import { CONTROLLER_BUNDLE, SIDECAR_BUNDLE } from "../../bench/image.js";
import { DOCKERFILE, assembleCommand, readStages, type Stage } from "../../support/deploy/dockerfile.js";

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

/** Package names that production code (both programs, the driver-stub, proto/gen) loads at run time. */
function runtimeImports(dirs = ["sidecar", "controller", "common", "driver-stub", "proto/gen"]): Map<string, string> {
  const found = new Map<string, string>();
  const walk = (dir: string): string[] =>
    readdirSync(join(repoRoot, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
    );
  for (const file of dirs.flatMap(walk)) {
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

const dockerfile = DOCKERFILE;
const stages = readStages(dockerfile);
const stage = (name: string) => {
  const s = stages.find((x) => x.name === name);
  assert.ok(s, `no stage ${name}`);
  return s;
};
/** The default target (the last stage) is the production image. */
const runtime = stages.at(-1)!;
const argDefault = (name: string) => new RegExp(`^ARG ${name}=(\\S+)$`, "m").exec(dockerfile)?.[1];
const dockerignore = readFileSync(join(repoRoot, ".dockerignore"), "utf8")
  .split("\n")
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith("#"));
const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
  bin: Record<"csi-addons-sidecar" | "csi-addons-driver-stub" | "csi-addons-healer-controller", string>;
  dependencies: Record<string, string>;
};
const step = (stage: Stage, op: string) => stage.steps.filter((s) => s.op === op).map((s) => s.args);

describe("Dockerfile", () => {
  test("multi-stage on Node 24; the sidecar stage is distroless: it copies from the others and runs nothing", () => {
    assert.ok(stages.length >= 4);
    assert.equal(runtime.name, "sidecar", "the default target is the sidecar");
    assert.match(argDefault("NODE_IMAGE") ?? "", /^node:24-bookworm-slim$/);
    assert.match(argDefault("RUNTIME_IMAGE") ?? "", /^gcr\.io\/distroless\/nodejs24-debian12:nonroot$/);
    for (const s of stages) assert.ok(["${NODE_IMAGE}", "${RUNTIME_IMAGE}"].includes(s.from), `${s.name} is FROM ${s.from}`);
    assert.equal(runtime.from, "${RUNTIME_IMAGE}");
    assert.deepEqual(step(runtime, "RUN"), [], "distroless has no shell: no RUN in the sidecar stage");
    const copies = step(runtime, "COPY");
    assert.ok(copies.length > 0 && copies.every((c) => c.startsWith("--from=")), "the sidecar stage copies only from build stages");
    assert.deepEqual(
      step(stage("driver-stub"), "RUN").filter((r) => /\b(npm|npx|yarn)\s+\w/.test(r)),
      [],
    );
  });

  test("the build stage bundles the sidecar and the controller (npm run build runs scripts/bundle.mjs, copied before) and the sidecar image ships the bundles", () => {
    const build = stage("build");
    const scripts = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
    assert.match(scripts["build"]!, /node scripts\/bundle\.mjs/);
    for (const bundle of [SIDECAR_BUNDLE, CONTROLLER_BUNDLE]) {
      assert.ok(readFileSync(join(repoRoot, "scripts/bundle.mjs"), "utf8").includes(`"${bundle}"`), `scripts/bundle.mjs writes ${bundle}`);
    }
    const runIndex = build.steps.findIndex((st) => st.op === "RUN" && /\bnpm run build\b/.test(st.args));
    assert.ok(
      runIndex > 0 && build.steps.slice(0, runIndex).some((st) => st.op === "COPY" && /^scripts\/(bundle\.mjs)?\s/.test(st.args)),
      "scripts/bundle.mjs is copied before the build",
    );
    assert.doesNotMatch(
      step(build, "RUN").find((r) => /\bnpm ci\b/.test(r))!,
      /--omit=optional/,
      "esbuild's platform binary is an optional dependency",
    );
    // That the bundles, their chunks and the vendor .proto files all reach the image: image-files.test.ts
    // runs this stage's assembling command and starts both programs from what it copied.
    assert.ok(assembleCommand(stages).includes("/out/sidecar/dist"));
  });

  test("the compile cache is made by the runtime image's own Node, as the programs' user, and read by them", () => {
    const cache = stage("compile-cache");
    assert.equal(cache.from, "${RUNTIME_IMAGE}", "a cache is valid only for the Node binary that made it");
    const user = step(runtime, "USER").at(-1)!;
    assert.equal(step(cache, "USER").at(-1), user, "and only for the user id that made it");
    const env = (s: Stage) => step(s, "ENV").find((e) => e.startsWith("NODE_COMPILE_CACHE="));
    const dir = env(runtime)?.split("=")[1];
    assert.ok(dir && env(cache) === env(runtime), "both stages name the same folder");
    const entry = JSON.parse(step(runtime, "ENTRYPOINT").at(-1)!) as string[];
    assert.deepEqual(
      step(cache, "RUN").map((r) => JSON.parse(r) as string[]),
      [
        [...entry, "--version"],
        [...controllerCommand(), "--version"],
      ],
      "it runs the sidecar's entrypoint and the controller's command once each (exec form: distroless has no shell)",
    );
    const writable = step(cache, "COPY").find((c) => c.includes(`--chown=${user}`) && c.trim().endsWith(".compile-cache/"));
    assert.ok(writable && relative(step(cache, "WORKDIR").at(-1)!, dir) === ".compile-cache", "the folder belongs to that user while the cache is made");
    assert.ok(
      step(runtime, "COPY").includes(`--from=compile-cache --chown=${user} ${dir}/ .compile-cache/`),
      "the sidecar stage copies it, owned by the user that reads it",
    );
    assert.equal(step(runtime, "WORKDIR").at(-1), step(cache, "WORKDIR").at(-1), "at the path it was made for");
  });

  test("the sidecar image gets no driver-stub code and no source maps", () => {
    const fromBuild = step(runtime, "COPY").filter((c) => c.startsWith("--from=build "));
    assert.deepEqual(fromBuild, ["--from=build /out/sidecar/ ./"]);
    const assemble = assembleCommand(stages);
    const intoSidecar = assemble.split("&&").filter((c) => /\/out\/sidecar/.test(c));
    assert.ok(intoSidecar.length > 0 && intoSidecar.every((c) => !c.includes("driver-stub")), intoSidecar.join("\n"));
    assert.ok(step(stage("build"), "RUN").includes("npm run build -- --sourceMap false"), "maps without the sources they map to");
    // The sidecar's code never reaches for the driver-stub's (it is not in its image).
    for (const [spec, file] of runtimeImports(["sidecar"])) assert.ok(!spec.includes("driver-stub"), `${file} imports ${spec}`);
  });

  test("both images carry the OCI labels, with the base image's name and digest", () => {
    for (const s of [runtime, stage("driver-stub")]) {
      const labels = step(s, "LABEL").join(" ");
      for (const key of ["title", "description", "source", "licenses", "version", "revision", "created", "base.name", "base.digest"]) {
        assert.match(labels, new RegExp(`org\\.opencontainers\\.image\\.${key.replace(".", "\\.")}=`), `${s.name}: no ${key} label`);
      }
    }
  });

  test("production dependencies only, without install scripts; the sidecar image none at all (its programs are bundles)", () => {
    const installs = stages.flatMap((s) => step(s, "RUN")).filter((r) => /\bnpm (ci|install|i)\b/.test(r));
    assert.ok(
      installs.every((r) => /\bnpm ci\b/.test(r) && r.includes("--ignore-scripts")),
      installs.join("\n"),
    );
    const deps = stages.find((s) => step(s, "RUN").some((r) => r.includes("--omit=dev")));
    assert.ok(deps?.name, "a stage installs with --omit=dev");
    assert.ok(step(stage("driver-stub"), "COPY").some((c) => c.startsWith(`--from=${deps.name} `) && c.includes("node_modules")));
    assert.deepEqual(
      step(runtime, "COPY").filter((c) => c.includes("node_modules") || c.startsWith(`--from=${deps.name} `)),
      [],
    );
  });

  test("production code imports only Node built-ins, dependencies and its own files", () => {
    for (const [spec, file] of runtimeImports()) {
      if (spec.startsWith("node:")) continue;
      if (spec.startsWith(".")) {
        const target = relative(repoRoot, resolve(dirname(join(repoRoot, file)), spec));
        assert.ok(!target.startsWith("test/") && !target.startsWith(".."), `${file} imports ${spec} (outside the image)`);
        continue;
      }
      const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!;
      assert.ok(name in pkg.dependencies, `${file} imports ${spec}, which is not a production dependency`);
    }
  });

  test("everything copied from the context exists and passes .dockerignore", () => {
    const sources = stages
      .flatMap((s) => step(s, "COPY"))
      .filter((c) => !c.startsWith("--from="))
      .flatMap((c) => c.split(/\s+/).slice(0, -1));
    assert.ok(sources.length > 0);
    for (const src of sources) {
      const path = normalize(src).replace(/\/$/, "");
      assert.ok(existsSync(join(repoRoot, path)), `${src} does not exist`);
      assert.ok(!ignored(path, dockerignore), `${src} is excluded by .dockerignore`);
    }
    const tsconfig = JSON.parse(readFileSync(join(repoRoot, "tsconfig.build.json"), "utf8")) as { include: string[] };
    for (const dir of tsconfig.include) {
      assert.ok(
        sources.some((s) => dir === normalize(s).replace(/\/$/, "") || dir.startsWith(normalize(s))),
        `${dir} is compiled but not copied`,
      );
    }
    for (const kept of ["node_modules", "dist", "test", ".git", "deploy", "node_modules/x", "sidecar/node_modules"]) {
      assert.ok(ignored(kept, dockerignore), `${kept} reaches the build context`);
    }
  });

  test("the entrypoint is the sidecar's bin, run as the user the DaemonSet expects; the controller's Deployment runs the other bin", () => {
    const workdir = step(runtime, "WORKDIR").at(-1)!;
    const entry = JSON.parse(step(runtime, "ENTRYPOINT").at(-1)!) as string[];
    assert.equal(entry[0], "/nodejs/bin/node", "distroless's node, without a PATH lookup");
    assert.equal(relative(workdir, entry[1]!), normalize(pkg.bin["csi-addons-sidecar"]));
    const bin = readFileSync(join(repoRoot, pkg.bin["csi-addons-sidecar"]), "utf8");
    assert.ok(bin.includes(`../${SIDECAR_BUNDLE}`), "the bin runs the bundled sidecar");
    assert.ok(existsSync(join(repoRoot, "sidecar/main.ts")));
    // The controller's Deployment runs the image's other bin, which runs the bundled controller.
    assert.equal(relative(workdir, controllerCommand()[1]!), normalize(pkg.bin["csi-addons-healer-controller"]!));
    assert.ok(
      readFileSync(join(repoRoot, pkg.bin["csi-addons-healer-controller"]!), "utf8").includes(`../${CONTROLLER_BUNDLE}`),
      "the bin runs the bundled controller",
    );

    const user = step(runtime, "USER").at(-1)!.split(":");
    if (noKubectl) return;
    const ds = findOne(render(""), "DaemonSet") as unknown as {
      spec: {
        template: {
          spec: {
            securityContext: { fsGroup: number };
            containers: { name: string; image: string; command?: string[]; securityContext: { runAsUser: number; runAsGroup?: number } }[];
          };
        };
      };
    };
    const pod = ds.spec.template.spec;
    const sidecar = pod.containers.find((c) => c.name === "csi-addons-healer")!;
    assert.equal(Number(user[0]), sidecar.securityContext.runAsUser);
    assert.equal(Number(user[1]), sidecar.securityContext.runAsGroup);
    assert.equal(Number(user[1]), pod.securityContext.fsGroup);
    // The driver container starts the driver-stub image's bin.
    const driver = pod.containers.find((c) => c.name === "driver")!;
    const stubEntry = JSON.parse(step(stage("driver-stub"), "ENTRYPOINT").at(-1)!) as string[];
    assert.equal(relative(workdir, stubEntry[1]!), normalize(pkg.bin["csi-addons-driver-stub"]));
    assert.ok(driver.command?.join(" ").includes(join(workdir, pkg.bin["csi-addons-driver-stub"])), "driver command");
    const images = readKustomization().images!;
    assert.equal(driver.image, `${images.find((i) => i.name === "csi-addons-healer-driver-stub")!.newName}:${images[1]!.newTag}`);
  });

  test("scripts/build-image.sh builds both targets for amd64 and arm64 from bases pinned by digest", () => {
    const dir = tempDir();
    const log = join(dir, "calls");
    const digest = `sha256:${"ab".repeat(32)}`;
    // A stand-in docker: records each call, answers imagetools inspect with a digest.
    writeFileSync(join(dir, "docker"), `#!/bin/sh\necho "$*" >> ${log}\ncase "$*" in *imagetools*) echo ${digest};; esac\n`);
    chmodSync(join(dir, "docker"), 0o755);
    const run = (args: string[], env: Record<string, string> = {}) =>
      spawnSync("bash", [join(repoRoot, "scripts/build-image.sh"), ...args], {
        encoding: "utf8",
        env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, ...env },
      });
    const r = run(["registry.example.com", "1.2.3"]);
    assert.equal(r.status, 0, r.stderr);
    const calls = readFileSync(log, "utf8").trim().split("\n");
    const builds = calls.filter((c) => c.startsWith("buildx build"));
    assert.equal(builds.length, 2);
    for (const [target, image] of [
      ["sidecar", "csi-addons-healer"],
      ["driver-stub", "csi-addons-healer-driver-stub"],
    ]) {
      const b = builds.find((c) => c.includes(`--target ${target} `));
      assert.ok(b, `no build of ${target}`);
      assert.match(b, /--platform linux\/amd64,linux\/arm64 /);
      assert.match(b, new RegExp(`--tag registry\\.example\\.com/${image}:1\\.2\\.3 `));
      assert.ok(
        b.includes(`NODE_IMAGE=node:24-bookworm-slim@${digest}`) && b.includes(`RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12:nonroot@${digest}`),
        b,
      );
      assert.ok(b.includes(`NODE_IMAGE_DIGEST=${digest}`) && b.includes("VERSION=1.2.3"), b);
      assert.match(b, /--push$/);
    }
    // A base that cannot be resolved stops the build; --load refuses two platforms.
    writeFileSync(join(dir, "docker"), `#!/bin/sh\necho "$*" >> ${log}\ncase "$*" in *imagetools*) echo "";; esac\n`);
    assert.equal(run(["r", "t"]).status, 1);
    assert.equal(run(["r", "t", "--load"]).status, 2);
    assert.equal(run(["r", "t", "--load"], { PLATFORMS: "linux/arm64" }).status, 1, "one platform may load (then fails on the digest here)");
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

// The sidecar and the controller as their image runs them, short of building the image (no
// registry here for the base images): the build stage's own assembling command copies the files
// the image gets, and each program starts from them through its bin (the sidecar through the
// image's entrypoint, the controller as deploy/'s Deployment runs it), under deploy/'s V8 flags,
// with no node_modules anywhere above them. So the bundles are self-contained, and the chunks the
// sidecar loads only when needed (the self-signed certificate generator, gRPC reflection, the YAML
// parser) are in the image and load. The compile cache the image makes is accepted by the next start.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { after, before, describe, test } from "node:test";
import { stringify } from "yaml";
import { COMPILED_CONTROLLER, COMPILED_SIDECAR, ensureCompiled } from "../../bench/build.js";
import { controllerCommand } from "../../bench/deploy-limits.js";
import { CONTROLLER_NODE_FLAGS, SIDECAR_NODE_FLAGS } from "../../bench/image.js";
import { localControllerArgs } from "../../demo/controller-process.js";
import { localSidecarArgs } from "../../demo/processes.js";
import { spawnLogged, type LoggedProcess } from "../../demo/logged-process.js";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { NAMESPACE, POD } from "../../support/fixtures.js";
import { repoRoot, tempDir } from "../../support/proc.js";
import { reflectionClient } from "../../support/reflection.js";
import { servedCertificate } from "../../support/secure-sidecar.js";
import { assembleCommand, DOCKERFILE, readStages } from "../../support/deploy/dockerfile.js";

const stages = readStages(DOCKERFILE);
const entrypoint = JSON.parse(
  stages
    .at(-1)!
    .steps.filter((s) => s.op === "ENTRYPOINT")
    .at(-1)!.args,
) as string[];

let out: string;
/** The image's entrypoint script, and the controller's bin, in the assembled tree. */
let bin: string;
let controllerBin: string;
let kube: KubeApi;
let driver: DriverStub;
const running: LoggedProcess[] = [];

before(async () => {
  ensureCompiled(() => undefined, [COMPILED_SIDECAR, COMPILED_CONTROLLER]);
  out = tempDir("image-files-");
  // /out/sidecar/ is what the sidecar stage copies to its WORKDIR (/app).
  const r = spawnSync("bash", ["-c", assembleCommand(stages).replaceAll("/out/", `${out}/`)], { cwd: repoRoot, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  bin = join(out, "sidecar", relative("/app", entrypoint[1]!));
  controllerBin = join(out, "sidecar", relative("/app", controllerCommand()[1]!));
  assert.ok(!existsSync(join(out, "node_modules")) && !existsSync(join(dirname(out), "node_modules")), "no node_modules to fall back on");
  kube = await startTestKube();
  driver = await startDriverStub();
});
after(async () => {
  for (const p of running) await p.stop();
  await driver?.stop();
  await kube?.stop();
});

async function startImageSidecar(name: string, args: string[]): Promise<LoggedProcess> {
  const dir = tempDir(`${name}-`);
  // A kubeconfig in YAML, as kubectl writes it: the sidecar then loads its YAML parser's chunk.
  const kubeconfig = join(dir, "kubeconfig.yaml");
  writeFileSync(kubeconfig, stringify(JSON.parse(readFileSync(kube.kubeconfigPath, "utf8"))));
  const logFile = join(dir, "sidecar.log");
  const base = localSidecarArgs({ build: "compiled", driverSocket: driver.addonsSocket, kubeconfig, logFile }).filter((a) => !a.startsWith("--enable-auth"));
  const p = await spawnLogged({
    what: `the image's sidecar (${name})`,
    entry: relative(repoRoot, bin),
    nodeArgs: SIDECAR_NODE_FLAGS,
    args: [...base, ...args],
    logFile,
    startedMessage: "sidecar started",
  });
  running.push(p);
  await p.waitReadyz(200);
  return p;
}

describe("the sidecar from the image's files", () => {
  test("auth off, a YAML kubeconfig: ready, and gRPC reflection (protobufjs, loaded on first use) describes what it serves", async () => {
    const s = await startImageSidecar("plain", ["--enable-auth=false"]);
    const reflection = reflectionClient(`127.0.0.1:${s.started["controllerPort"] as number}`);
    try {
      const services = await reflection.services();
      assert.ok(services.includes("sidecar.v1.VolumeHealer") && services.includes("proto.ReclaimSpace"), services.join(","));
      assert.match(await reflection.describe("proto.ReclaimSpace"), /ControllerReclaimSpace/);
    } finally {
      reflection.close();
    }
  });

  test("auth on without certificate files: it serves TLS with the certificate it generated for itself", async () => {
    const s = await startImageSidecar("tls", ["--enable-auth=true"]);
    const port = s.started["controllerPort"] as number;
    assert.equal((await servedCertificate(port)).subject.CN, `${POD}.${NAMESPACE}`);
    assert.match(await s.metrics(), /^csi_addons_sidecar_tls_certificate_source\{source="self-signed"\} 1$/m);
  });
});

/** deploy/'s V8 heap caps among a container's NODE_OPTIONS (the rest, e.g. --disable-warning, is no heap default). */
const heapFlags = (flags: readonly string[]) => flags.filter((f) => /^--max-(old|semi)-space-size=/.test(f));

/** What a start of `file --version` ends up running with: its pid, Node's flags, V8's heap limit. */
function startedWith(nodeArgs: readonly string[], file: string, nodeOptions: string | undefined) {
  // Through --import, which a replaced start keeps: the report comes from the process that ran the program.
  const hook = `data:text/javascript,${encodeURIComponent(`const v8 = await import("node:v8"); process.on("exit", () => console.error(JSON.stringify({ pid: process.pid, execArgv: process.execArgv, heapLimit: v8.getHeapStatistics().heap_size_limit })));`)}`;
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: nodeOptions };
  if (nodeOptions === undefined) delete env["NODE_OPTIONS"];
  const r = spawnSync(process.execPath, [...nodeArgs, "--import", hook, file, "--version"], { encoding: "utf8", env });
  assert.equal(r.status, 0, r.stderr);
  const line = r.stderr.split("\n").find((l) => l.startsWith("{"));
  assert.ok(line, r.stderr);
  const seen = JSON.parse(line) as { pid: number; execArgv: string[]; heapLimit: number };
  return { ...seen, spawnedPid: r.pid };
}

describe("the image's entry points carry deploy/'s heap caps, and NODE_OPTIONS overrides them", () => {
  test("the ENTRYPOINT and deploy/'s controller command give Node no V8 flag (one there would win over NODE_OPTIONS)", () => {
    assert.deepEqual(
      entrypoint.filter((a) => a.startsWith("--")),
      [],
    );
    assert.deepEqual(
      controllerCommand().filter((a) => a.startsWith("--")),
      [],
    );
  });

  for (const [program, deployFlags] of [
    ["sidecar", SIDECAR_NODE_FLAGS],
    ["controller", CONTROLLER_NODE_FLAGS],
  ] as const) {
    test(`the ${program} started as the image starts it, without NODE_OPTIONS: the heap of deploy/'s NODE_OPTIONS; NODE_OPTIONS still decides`, () => {
      const file = program === "sidecar" ? bin : controllerBin;
      const caps = heapFlags(deployFlags);
      assert.equal(caps.length, 2, `deploy/ caps the ${program}'s old and young generations: ${deployFlags.join(" ")}`);
      const asDeployed = startedWith([], file, caps.join(" "));
      assert.deepEqual(
        asDeployed.execArgv.filter((f) => f !== "--import" && !f.startsWith("data:")),
        [],
        "NODE_OPTIONS gives them: started once, as it was",
      );

      const bare = startedWith([], file, undefined);
      assert.equal(bare.pid, bare.spawnedPid, "replaced in place (same pid: the container's process), not a child");
      assert.deepEqual(heapFlags(bare.execArgv).sort(), [...caps].sort());
      assert.equal(bare.heapLimit, asDeployed.heapLimit, "the same V8 heap limit as under deploy/'s NODE_OPTIONS");

      // A bigger old space through NODE_OPTIONS wins; the young generation keeps its default cap.
      const bigger = startedWith([], file, "--max-old-space-size=400");
      const expected = startedWith(["--max-old-space-size=400", caps.find((f) => f.startsWith("--max-semi"))!], file, undefined);
      assert.deepEqual(
        heapFlags(bigger.execArgv),
        caps.filter((f) => f.startsWith("--max-semi")),
      );
      assert.equal(bigger.heapLimit, expected.heapLimit);
      assert.ok(bigger.heapLimit > asDeployed.heapLimit + 200 * 1024 ** 2, `${bigger.heapLimit} vs ${asDeployed.heapLimit}`);
    });
  }
});

describe("the image's compile cache", () => {
  for (const [program, flags, bundle] of [
    ["sidecar", SIDECAR_NODE_FLAGS, COMPILED_SIDECAR],
    ["controller", CONTROLLER_NODE_FLAGS, COMPILED_CONTROLLER],
  ] as const) {
    test(`the ${program}'s compile cache made by --version, as the image's compile-cache stage makes it, is accepted by the next start`, () => {
      const cache = tempDir("compile-cache-");
      const file = program === "sidecar" ? bin : controllerBin;
      const node = (args: string[], env: NodeJS.ProcessEnv) =>
        spawnSync(process.execPath, [...flags, file, ...args], { encoding: "utf8", env: { ...process.env, NODE_COMPILE_CACHE: cache, ...env } });
      assert.equal(node(["--version"], {}).status, 0);
      const next = node(["--version"], { NODE_DEBUG_NATIVE: "COMPILE_CACHE" });
      const accepted = next.stderr.split("\n").filter((l) => /V8 code cache for ESM \S+ was accepted/.test(l));
      assert.ok(
        accepted.some((l) => l.includes(`/${bundle} `)),
        next.stderr,
      );
      assert.doesNotMatch(next.stderr, /was rejected|mismatch/);
    });
  }
});

describe("the controller from the image's files", () => {
  test("it lists the cluster, gets ready, and its log holds only its own JSON lines (no warning from Node about a bundled dependency)", async () => {
    const dir = tempDir("image-controller-");
    const logFile = join(dir, "controller.log");
    const c = await spawnLogged({
      what: "the image's controller",
      entry: relative(repoRoot, controllerBin),
      nodeArgs: CONTROLLER_NODE_FLAGS,
      args: localControllerArgs({ build: "compiled", kubeconfig: kube.kubeconfigPath, logFile }),
      logFile,
      startedMessage: "controller started",
    });
    running.push(c);
    await c.waitReadyz(200);
    assert.match(await c.metrics(), /^csi_addons_healer_/m);
    // Node's deprecation warnings about client-node's dependencies (the built-in punycode, url.parse)
    // are printed for code outside node_modules, as a bundle is: one went into the bundle as the
    // userland package, the other is silenced by deploy/'s NODE_OPTIONS.
    const stray = readFileSync(logFile, "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "" && !l.startsWith("{"));
    assert.deepEqual(stray, []);
  });
});

// The sidecar as its image runs it, short of building the image (no registry here for the base
// images): the build stage's own assembling command copies the files the image gets, and the
// sidecar starts from them through the image's entrypoint, under deploy/'s V8 flags, with no
// node_modules anywhere above it. So the bundle is self-contained, and the chunks it loads only when
// needed (the self-signed certificate generator, gRPC reflection, the YAML parser) are in the image
// and load. The compile cache the image makes is accepted by the next start.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import * as tls from "node:tls";
import { dirname, join, relative } from "node:path";
import { after, before, describe, test } from "node:test";
import { stringify } from "yaml";
import { COMPILED_SIDECAR, ensureCompiled } from "../bench/build.js";
import { SIDECAR_NODE_FLAGS } from "../bench/image.js";
import { localSidecarArgs } from "../demo/processes.js";
import { spawnLogged, type LoggedProcess } from "../demo/logged-process.js";
import type { KubeApi } from "../kube/index.js";
import { startTestKube } from "../support/cluster.js";
import { startDriverStub, type DriverStub } from "../support/driver-stub.js";
import { NAMESPACE, POD } from "../support/fixtures.js";
import { repoRoot, tempDir } from "../support/proc.js";
import { reflectionClient } from "../support/reflection.js";
import { assembleCommand, DOCKERFILE, readStages } from "./dockerfile.js";

const stages = readStages(DOCKERFILE);
const entrypoint = JSON.parse(stages.at(-1)!.steps.filter((s) => s.op === "ENTRYPOINT").at(-1)!.args) as string[];

let out: string;
/** The image's entrypoint script, in the assembled tree. */
let bin: string;
let kube: KubeApi;
let driver: DriverStub;
const running: LoggedProcess[] = [];

before(async () => {
  ensureCompiled(() => undefined, [COMPILED_SIDECAR]);
  out = tempDir("image-files-");
  // /out/sidecar/ is what the sidecar stage copies to its WORKDIR (/app).
  const r = spawnSync("bash", ["-c", assembleCommand(stages).replaceAll("/out/", `${out}/`)], { cwd: repoRoot, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  bin = join(out, "sidecar", relative("/app", entrypoint[1]!));
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
  const p = await spawnLogged({ what: `the image's sidecar (${name})`, entry: relative(repoRoot, bin), nodeArgs: SIDECAR_NODE_FLAGS, args: [...base, ...args], logFile, startedMessage: "sidecar started" });
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
    const subject = await new Promise<string>((resolve, reject) => {
      const socket = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false, ALPNProtocols: ["h2"] }, () => {
        resolve(String(socket.getPeerCertificate().subject.CN ?? ""));
        socket.end();
      });
      socket.on("error", reject);
    });
    assert.equal(subject, `${POD}.${NAMESPACE}`);
    assert.match(await s.metrics(), /^csi_addons_sidecar_tls_certificate_source\{source="self-signed"\} 1$/m);
  });

  test("the compile cache made by --version, as the image's compile-cache stage makes it, is accepted by the next start", () => {
    const cache = tempDir("compile-cache-");
    const node = (args: string[], env: NodeJS.ProcessEnv) =>
      spawnSync(process.execPath, [...SIDECAR_NODE_FLAGS, bin, ...args], { encoding: "utf8", env: { ...process.env, NODE_COMPILE_CACHE: cache, ...env } });
    assert.equal(node(["--version"], {}).status, 0);
    const next = node(["--version"], { NODE_DEBUG_NATIVE: "COMPILE_CACHE" });
    const accepted = next.stderr.split("\n").filter((l) => /V8 code cache for ESM \S+ was accepted/.test(l));
    assert.ok(accepted.some((l) => l.includes("/dist/csi-addons-sidecar.mjs ")), next.stderr);
    assert.doesNotMatch(next.stderr, /was rejected|mismatch/);
  });
});

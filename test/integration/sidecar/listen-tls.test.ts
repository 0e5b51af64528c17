// Listening and TLS: the sidecar listens on every address, IPv6 and IPv4, by default; with
// --require-tls-files it never falls back to a self-signed certificate; /metrics tells where the
// certificate comes from and when it expires.
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { ConfigError, parseConfig } from "../../../sidecar/config/config.js";
import { listenHost } from "../../../common/net/listen-host.js";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { tempDir, type Proc, startProgram } from "../../support/proc.js";
import { startSidecarProc, type SidecarProc } from "../../support/sidecar.js";
import { waitFor } from "../../support/wait.js";
import { authArgs, makeTlsFiles } from "../../support/secure-sidecar.js";
import type { HealthCheck } from "../../support/grpc.js";

const HealthClient = grpc.makeClientConstructor(healthService as grpc.ServiceDefinition, "grpc.health.v1.Health");
const REQUIRED = ["--node-id=n", "--pod=p", "--namespace=ns"];

/** grpc.health.v1 Check over plaintext at `address`; the status, or the error's message. */
function check(address: string): Promise<string> {
  const c = new HealthClient(address, grpc.credentials.createInsecure());
  return new Promise((resolve) =>
    (c as unknown as { check: HealthCheck }).check({ service: "" }, { deadline: Date.now() + 5000 }, (err: Error | null, res: { status: string }) => {
      c.close();
      resolve(err ? err.message : res.status);
    }),
  );
}

/** The value of a metric line `name{labels} value`, or undefined. */
function metric(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
const SOURCE = (s: string) => `csi_addons_sidecar_tls_certificate_source{source="${s}"}`;
const EXPIRY_OF = (s: string) => `csi_addons_sidecar_tls_certificate_expiry_timestamp_seconds{source="${s}"}`;

let kube: KubeApi;
let driver: DriverStub;
const sidecars: SidecarProc[] = [];
const procs: Proc[] = [];
before(async () => {
  kube = await startTestKube();
  driver = await startDriverStub();
});
after(async () => {
  for (const s of sidecars) await s.stop();
  for (const p of procs) await p.stop();
  await driver?.stop();
  await kube?.stop();
});
const start = async (opts: { args?: string[]; listenAll?: boolean }) => {
  const s = await startSidecarProc({ driverSocket: driver.addonsSocket, kubeconfig: kube.kubeconfigPath, ...opts });
  sidecars.push(s);
  return s;
};

describe("listen addresses", () => {
  test("by default the controller port and the HTTP endpoint answer on IPv6 and IPv4", async () => {
    const parsed = parseConfig(REQUIRED.concat("--enable-auth=false"), {});
    assert.equal(parsed.kind === "config" && parsed.config.controllerIp, "::");
    const s = await start({ listenAll: true });
    for (const host of ["127.0.0.1", "[::1]"]) {
      await waitFor(`gRPC health over ${host}`, async () => (await check(`${host}:${s.port}`)) === "SERVING" || undefined, { timeoutMs: 20_000 });
      const res = await fetch(`http://${host}:${s.httpPort}/healthz`);
      assert.equal(res.status, 200, `/healthz over ${host}`);
    }
  });

  test("an explicit address is kept; :: falls back to 0.0.0.0 only on a node without IPv6", () => {
    const v4only = { lo: [{ address: "127.0.0.1", family: "IPv4" }] } as unknown as ReturnType<typeof import("node:os").networkInterfaces>;
    const v6 = { lo: [{ address: "::1", family: "IPv6" }] } as unknown as ReturnType<typeof import("node:os").networkInterfaces>;
    assert.equal(listenHost("::", v6), "::");
    assert.equal(listenHost("::", v4only), "0.0.0.0");
    assert.equal(listenHost("10.0.0.7", v4only), "10.0.0.7");
    assert.equal(listenHost("fd00::7", v6), "fd00::7");
    const http = parseConfig(REQUIRED.concat("--enable-auth=false", "--http-endpoint=:9072"), {});
    assert.deepEqual(http.kind === "config" && http.config.httpEndpoint, { host: "::", port: 9072 });
    const bracketed = parseConfig(REQUIRED.concat("--enable-auth=false", "--http-endpoint=[fd00::7]:9072"), {});
    assert.deepEqual(bracketed.kind === "config" && bracketed.config.httpEndpoint, { host: "fd00::7", port: 9072 });
  });
});

describe("TLS certificate: required files, source and expiry", () => {
  test("--require-tls-files needs TLS and both files", () => {
    const flagOf = (argv: string[]) => {
      try {
        parseConfig(REQUIRED.concat(argv), {});
        return "accepted";
      } catch (err) {
        return err instanceof ConfigError ? err.flag : String(err);
      }
    };
    assert.equal(flagOf(["--auth-audience=a", "--require-tls-files"]), "require-tls-files");
    assert.equal(flagOf(["--enable-auth=false", "--require-tls-files", "--tls-cert-file=c", "--tls-key-file=k"]), "require-tls-files");
    assert.equal(flagOf(["--auth-audience=a", "--require-tls-files", "--tls-cert-file=c", "--tls-key-file=k"]), "accepted");
  });

  test("required files that are missing: the sidecar exits 1 naming them, and never serves", async () => {
    const dir = tempDir();
    const missing = { caPem: "", certFile: `${dir}/absent.crt`, keyFile: `${dir}/absent.key` };
    const p = startProgram("sidecar", [
      `--csi-addons-address=unix://${driver.addonsSocket}`,
      ...REQUIRED,
      `--kubeconfig=${kube.kubeconfigPath}`,
      "--controller-ip=127.0.0.1",
      "--controller-port=0",
      ...authArgs("csi-addons-healer", missing),
      "--require-tls-files",
    ]);
    procs.push(p);
    let code: number | string | undefined;
    void p.exited.then((c) => (code = c));
    await waitFor("the sidecar to exit", () => code !== undefined, { timeoutMs: 30_000 });
    assert.equal(code, 1);
    assert.match(p.stdout(), /absent\.crt.*ENOENT.*--require-tls-files/);
    assert.doesNotMatch(p.stdout(), /sidecar started/);
  });

  test("from files: source files, expiry = the certificate's notAfter", async () => {
    const tls = await makeTlsFiles(tempDir());
    const s = await start({ args: [...authArgs("csi-addons-healer", tls), "--require-tls-files"] });
    const text = await s.metrics();
    assert.equal(metric(text, SOURCE("files")), 1);
    assert.equal(metric(text, SOURCE("self-signed")), 0);
    const notAfter = new Date(new X509Certificate(readFileSync(tls.certFile)).validTo).getTime() / 1000;
    assert.equal(metric(text, EXPIRY_OF("files")), notAfter);
  });

  test("without files and not required: source self-signed, expiring in about a year", async () => {
    const s = await start({ args: ["--enable-auth=true", "--auth-audience=csi-addons-healer"] });
    const text = await s.metrics();
    assert.equal(metric(text, SOURCE("self-signed")), 1);
    assert.equal(metric(text, SOURCE("files")), 0);
    const days = (metric(text, EXPIRY_OF("self-signed"))! - Date.now() / 1000) / 86400;
    assert.ok(days > 300 && days < 400, `expires in ${days} days`);
  });

  test("auth off: source none, no expiry", async () => {
    const s = await start({});
    const text = await s.metrics();
    assert.equal(metric(text, SOURCE("none")), 1);
    assert.doesNotMatch(text, /^csi_addons_sidecar_tls_certificate_expiry_timestamp_seconds\{/m);
  });
});

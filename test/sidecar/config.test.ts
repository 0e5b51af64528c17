import { test } from "node:test";
import assert from "node:assert/strict";
import { ConfigError, parseConfig, type Config } from "../../sidecar/config/config.js";
import { parseDuration } from "../../sidecar/config/duration.js";
import { startTs } from "../support/proc.js";

const base = ["--node-id=n1", "--pod=p", "--namespace=ns", "--enable-auth=false"];

function cfg(argv: string[], env: NodeJS.ProcessEnv = {}): Config {
  const r = parseConfig(argv, env);
  assert.equal(r.kind, "config");
  return (r as { config: Config }).config;
}

function rejects(argv: string[], flag: string, env: NodeJS.ProcessEnv = {}): ConfigError {
  try {
    parseConfig(argv, env);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    assert.equal(err.flag, flag);
    assert.match(err.message, new RegExp(`--${flag}`));
    return err;
  }
  assert.fail(`expected --${flag} to be rejected`);
}

test("defaults of DESIGN 4.1", () => {
  const c = cfg(base);
  assert.equal(c.csiAddonsAddress, "unix:///run/csi-addons/socket");
  assert.equal(c.csiAddonsSocket, "/run/csi-addons/socket");
  assert.equal(c.controllerPort, 9070);
  assert.equal(c.stagingPath, "/var/lib/kubelet/plugins/kubernetes.io/csi/");
  assert.equal(c.timeoutMs, 180_000);
  assert.equal(c.httpEndpoint, undefined);
  assert.equal(c.logFormat, "json");
  assert.deepEqual(c.authz, { verb: "update", group: "csiaddons.openshift.io", resource: "csiaddonsnodes" });
});

test("the other documented defaults (README's flag table)", () => {
  const c = cfg(base);
  assert.equal(c.maxInflight, 16);
  assert.equal(c.maxQueue, 64, "4 x max-inflight");
  assert.equal(c.controllerIp, "::", "every IPv6 and IPv4 address");
  assert.equal(c.logLevel, "info");
  assert.equal(c.podUid, "", "read from the Pod");
  assert.equal(c.kubeconfig, undefined, "in-cluster");
  assert.equal(c.authCacheTtlMs, 30_000);
  assert.equal(c.shutdownGraceMs, 25_000);
  assert.equal(c.secretCacheTtlMs, 10_000);
  assert.equal(c.terminationLog, "/dev/termination-log");
  assert.equal(c.tlsCertFile, undefined);
  assert.equal(cfg(["--node-id=n1", "--pod=p", "--namespace=ns", "--auth-audience=a"]).enableAuth, true, "auth on by default");
});

test("every flag's environment variable form", () => {
  const env: NodeJS.ProcessEnv = {
    CSI_ADDONS_ENDPOINT: "unix:///e/a.sock",
    NODE_ID: "en",
    POD_NAME: "ep",
    POD_NAMESPACE: "ens",
    POD_UID: "eu",
    CONTROLLER_PORT: "9999",
    CONTROLLER_IP: "127.0.0.9",
    STAGING_PATH: "/e/staging/",
    TIMEOUT: "7s",
    HTTP_ENDPOINT: "127.0.0.1:9808",
    KUBECONFIG: "/e/kubeconfig",
    MAX_INFLIGHT: "3",
    MAX_QUEUE: "5",
    LOG_LEVEL: "debug",
    LOG_FORMAT: "text",
    ENABLE_AUTH: "true",
    AUTH_AUDIENCE: "e-aud",
    AUTH_VERB: "e-verb",
    AUTH_GROUP: "e.group",
    AUTH_RESOURCE: "e-res",
    AUTH_CACHE_TTL: "4s",
    TLS_CERT_FILE: "/e/tls.crt",
    TLS_KEY_FILE: "/e/tls.key",
    SHUTDOWN_GRACE: "6s",
    SECRET_CACHE_TTL: "2s",
    TERMINATION_LOG: "/e/termination-log",
  };
  const c = cfg([], env);
  assert.deepEqual(
    [c.csiAddonsSocket, c.nodeId, c.pod, c.namespace, c.podUid, c.controllerPort, c.controllerIp, c.stagingPath, c.timeoutMs, c.httpEndpoint, c.kubeconfig],
    ["/e/a.sock", "en", "ep", "ens", "eu", 9999, "127.0.0.9", "/e/staging/", 7_000, { host: "127.0.0.1", port: 9808 }, "/e/kubeconfig"],
  );
  assert.deepEqual([c.maxInflight, c.maxQueue, c.logLevel, c.logFormat, c.enableAuth], [3, 5, "debug", "text", true]);
  assert.match(String(c.authAudience), /\be-aud\b/);
  assert.deepEqual(c.authz, { verb: "e-verb", group: "e.group", resource: "e-res" });
  assert.deepEqual([c.authCacheTtlMs, c.tlsCertFile, c.tlsKeyFile, c.shutdownGraceMs, c.secretCacheTtlMs, c.terminationLog], [4_000, "/e/tls.crt", "/e/tls.key", 6_000, 2_000, "/e/termination-log"]);
});

test("Go flag syntax: --x=v, --x v, -x v, bare booleans; flags win over env", () => {
  const c = cfg(["--node-id", "n2", "-pod", "p", "--namespace=ns", "--enable-auth=false", "--timeout=1m30s", "--http-endpoint", ":9808"], {
    NODE_ID: "from-env",
    CSI_ADDONS_ENDPOINT: "unix:///env.sock",
  });
  assert.equal(c.nodeId, "n2");
  assert.equal(c.csiAddonsSocket, "/env.sock");
  assert.equal(c.timeoutMs, 90_000);
  assert.deepEqual(c.httpEndpoint, { host: "::", port: 9808 });
  assert.equal(cfg([...base, "--enable-auth=false"]).enableAuth, false);
});

test("environment variables fill unset flags", () => {
  const c = cfg([], { NODE_ID: "n", POD_NAME: "p", POD_NAMESPACE: "ns", POD_UID: "u", ENABLE_AUTH: "false", MAX_INFLIGHT: "4" });
  assert.equal(c.podUid, "u");
  assert.equal(c.maxInflight, 4);
  assert.equal(c.maxQueue, 16);
});

test("invalid configuration names the flag", () => {
  rejects(["--pod=p", "--namespace=ns", "--enable-auth=false"], "node-id");
  rejects([...base, "--controller-port=99999"], "controller-port");
  rejects([...base, "--timeout=soon"], "timeout");
  rejects([...base, "--csi-addons-address=tcp://1.2.3.4:5"], "csi-addons-address");
  rejects([...base, "--log-format=xml"], "log-format");
  rejects([...base, "--bogus=1"], "bogus");
  rejects([...base, "--enable-auth=maybe"], "enable-auth");
  rejects(["--node-id=n1", "--pod=p", "--namespace=ns"], "auth-audience");
  rejects([...base, "--tls-cert-file=/x"], "tls-key-file");
  rejects([...base, "--kubeconfig"], "kubeconfig");
});

test("Go durations", () => {
  assert.equal(parseDuration("3m"), 180_000);
  assert.equal(parseDuration("250ms"), 250);
  assert.equal(parseDuration("1h2m3s"), 3_723_000);
  assert.equal(parseDuration("3"), undefined);
  assert.equal(parseDuration("3m "), undefined);
});

test("the process exits 2 with one stderr line naming the flag, before anything starts", async () => {
  const p = startTs("sidecar/main.ts", ["--pod=p", "--namespace=ns", "--controller-port=abc", "--node-id=n"]);
  assert.equal(await p.exited, 2);
  const lines = p.stderr().trim().split("\n");
  assert.equal(lines.length, 1, p.stderr());
  assert.match(lines[0]!, /--controller-port/);
  assert.equal(p.stdout(), "");
});

test("--version and --help exit 0", async () => {
  const v = startTs("sidecar/main.ts", ["--version"]);
  assert.equal(await v.exited, 0);
  assert.match(v.stdout(), /^csi-addons-sidecar \d+\.\d+\.\d+/);
  const h = startTs("sidecar/main.ts", ["--help"]);
  assert.equal(await h.exited, 0);
  assert.match(h.stdout(), /--csi-addons-address/);
});

test("a fatal start-up error (controller port in use) exits 1 with the reason in the log and --termination-log", async () => {
  const { createServer } = await import("node:net");
  const { writeFileSync, readFileSync } = await import("node:fs");
  const { join } = await import("node:path");
  const { tempDir } = await import("../support/proc.js");
  const dir = tempDir();
  // Never the host's /dev/termination-log.
  const terminationLog = join(dir, "termination-log");
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
  const port = (blocker.address() as { port: number }).port;
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(kubeconfig, "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n");
  try {
    const p = startTs("sidecar/main.ts", [...base, "--controller-ip=127.0.0.1", `--controller-port=${port}`, `--kubeconfig=${kubeconfig}`, "--csi-addons-address=unix:///nonexistent/addons.sock"], {
      env: { TERMINATION_LOG: terminationLog },
    });
    assert.equal(await p.exited, 1);
    const lines = p.stdout().trim().split("\n").map((l) => JSON.parse(l) as { level: string; message: string });
    const fatal = lines.find((l) => l.message.startsWith("fatal:"));
    assert.ok(fatal, p.stdout());
    assert.equal(fatal.level, "error");
    assert.match(fatal.message, /EADDRINUSE/);
    assert.equal(readFileSync(terminationLog, "utf8"), `${fatal.message}\n`);
  } finally {
    blocker.close();
  }
});

import { test } from "node:test";
import assert from "node:assert/strict";
import { ConfigError, FLAGS, parseConfig, type Config } from "../../../../sidecar/config/config.js";
import { parseDuration } from "../../../../common/config/duration.js";

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
  assert.deepEqual(c.authz, { verb: "call", group: "csiaddons.openshift.io", resource: "csiaddonsnodes" });
});

test("DESIGN 4.6 defaults: this node's audience and the API server's; a dedicated verb per service; all configurable", () => {
  const c = cfg(["--node-id=n1", "--pod=p", "--namespace=ns"]);
  assert.equal(c.enableAuth, true);
  assert.deepEqual(c.authAudiences, ["csi-addons-healer/n1", "@api-server"]);
  assert.equal(c.authSinglePermission, false);
  assert.equal(cfg([...base, "--auth-weaker-single-permission"]).authSinglePermission, true);
  assert.deepEqual(cfg(["--node-id=n2", "--pod=p", "--namespace=ns", "--auth-audience=@node,csi-addons-healer"]).authAudiences, [
    "csi-addons-healer/n2",
    "csi-addons-healer",
  ]);
  assert.deepEqual(c.authz, { verb: "call", group: "csiaddons.openshift.io", resource: "csiaddonsnodes" });
  const d = cfg([...base, "--auth-audience= a , @api-server,a", "--auth-verb=heal", "--auth-resource=pods", "--auth-group="]);
  assert.deepEqual(d.authAudiences, ["a", "@api-server"]);
  assert.deepEqual(d.authz, { verb: "heal", group: "", resource: "pods" });
  assert.deepEqual(cfg(base, { AUTH_AUDIENCE: "only-ours" }).authAudiences, ["only-ours"]);
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
  assert.equal(c.pvCacheTtlMs, 600_000);
  assert.equal(c.terminationLog, "/dev/termination-log");
  assert.equal(cfg([...base, "--termination-log="]).terminationLog, "/dev/termination-log", "an empty value is the default, as in the controller");
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
  assert.deepEqual(c.authAudiences, ["e-aud"]);
  assert.deepEqual(c.authz, { verb: "e-verb", group: "e.group", resource: "e-res" });
  assert.deepEqual(
    [c.authCacheTtlMs, c.tlsCertFile, c.tlsKeyFile, c.shutdownGraceMs, c.secretCacheTtlMs, c.terminationLog],
    [4_000, "/e/tls.crt", "/e/tls.key", 6_000, 2_000, "/e/termination-log"],
  );
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
  rejects([...base, "--auth-audience="], "auth-audience");
  rejects([...base, "--auth-audience=a,,b"], "auth-audience");
  rejects([...base, "--tls-cert-file=/x"], "tls-key-file");
  rejects([...base, "--kubeconfig"], "kubeconfig");
});

test("Go durations", () => {
  assert.equal(parseDuration("3m"), 180_000);
  assert.equal(parseDuration("250ms"), 250);
  assert.equal(parseDuration("1h2m3s"), 3_723_000);
  // Go accepts both spellings of microseconds (µ is escaped in the source, see duration.ts).
  assert.equal(parseDuration("1500\u00b5s"), 1.5);
  assert.equal(parseDuration("1500us"), 1.5);
  assert.equal(parseDuration("1s500000ns"), 1_000.5);
  assert.equal(parseDuration("3"), undefined);
  assert.equal(parseDuration("3m "), undefined);
  // A bare 0 is the one unitless duration Go accepts (e.g. --timeout=0); it means zero.
  assert.equal(parseDuration("0"), 0);
  assert.equal(parseDuration("00"), undefined);
  assert.equal(parseDuration(""), undefined);
});

test("upstream sidecar flags that mean nothing here: accepted, each named once in ignoredFlags; booleans take no value", () => {
  const c = cfg([
    ...base,
    "--logtostderr",
    "--node-id",
    "n9",
    "-alsologtostderr=false",
    "--vmodule=x=2",
    "--enable-volume-condition",
    "--enable-volume-condition=true",
    "--volume-condition-interval",
    "2m",
    "--zap-devel",
    "--stderrthreshold=2",
  ]);
  assert.equal(c.nodeId, "n9", "a boolean flag does not swallow the next argument");
  assert.deepEqual(
    c.ignoredFlags.map((f) => f.flag),
    ["--logtostderr", "--alsologtostderr", "--stderrthreshold", "--vmodule", "--zap-devel", "--enable-volume-condition", "--volume-condition-interval"],
  );
  assert.ok(c.ignoredFlags.every((f) => f.why.length > 0));
  assert.deepEqual(cfg(base).ignoredFlags, []);
});

test("upstream flags that mean something: -v, --zap-log-level, --zap-encoder, --enable-authentication, a bare socket path", () => {
  assert.equal(cfg([...base, "-v=5"]).logLevel, "debug");
  assert.equal(cfg([...base, "--v=0"]).logLevel, "info");
  assert.equal(cfg([...base, "--v=5", "--log-level=warn"]).logLevel, "warn", "--log-level wins");
  assert.equal(cfg([...base, "--zap-log-level=error"]).logLevel, "error");
  assert.equal(cfg([...base, "--zap-log-level=3"]).logLevel, "debug");
  assert.equal(cfg([...base, "--zap-encoder=console"]).logFormat, "text");
  assert.equal(cfg(["--node-id=n1", "--pod=p", "--namespace=ns", "--enable-authentication=false"]).enableAuth, false);
  const bare = cfg([...base, "--csi-addons-address=/csi/csi-addons.sock"]);
  assert.equal(bare.csiAddonsSocket, "/csi/csi-addons.sock");
  rejects([...base, "-v=loud"], "v");
  rejects([...base, "--zap-encoder=xml"], "zap-encoder");
});

test("upstream TLS flags: Go names mapped to node:tls options; TLS 1.3 suites always offered, as in Go", () => {
  assert.deepEqual(cfg(base).tls, { minVersion: "TLSv1.2" });
  assert.equal(cfg([...base, "--tls-min-version=VersionTLS13"]).tls.minVersion, "TLSv1.3");
  const t = cfg([
    ...base,
    "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
    "--tls-curve-preferences=CurveP384,X25519",
  ]).tls;
  assert.equal(
    t.ciphers,
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256",
  );
  assert.equal(t.ecdhCurve, "P-384:X25519");
  rejects([...base, "--tls-min-version=VersionTLS11"], "tls-min-version");
  rejects([...base, "--tls-cipher-suites=TLS_RSA_WITH_RC4_128_SHA"], "tls-cipher-suites");
  rejects([...base, "--tls-curve-preferences=P-256"], "tls-curve-preferences");
});

test("upstream leader-election flags: durations as client-go checks them, the pod's namespace by default", () => {
  assert.deepEqual(cfg(base).leaderElection, { namespace: "ns", leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 5_000 });
  const le = cfg([
    ...base,
    "--leader-election-namespace=other",
    "--leader-election-lease-duration=4s",
    "--leader-election-renew-deadline=3s",
    "--leader-election-retry-period=500ms",
  ]).leaderElection;
  assert.deepEqual(le, { namespace: "other", leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 });
  rejects([...base, "--leader-election-lease-duration=10s"], "leader-election-lease-duration");
  rejects([...base, "--leader-election-retry-period=9s"], "leader-election-renew-deadline");
  rejects([...base, "--leader-election-retry-period=soon"], "leader-election-retry-period");
});

test("bounds: --max-inflight at least 1, --max-queue at least 0 (no queue), --timeout positive, --node-confirm-timeout at least 300ms", () => {
  assert.equal(cfg([...base, "--max-inflight=1"]).maxInflight, 1);
  rejects([...base, "--max-inflight=0"], "max-inflight");
  assert.equal(cfg([...base, "--max-queue=0"]).maxQueue, 0);
  rejects([...base, "--max-queue=-1"], "max-queue");
  assert.equal(cfg([...base, "--timeout=1ms"]).timeoutMs, 1);
  rejects([...base, "--timeout=0"], "timeout");
  assert.equal(cfg([...base, "--node-confirm-timeout=300ms"]).nodeConfirmTimeoutMs, 300);
  rejects([...base, "--node-confirm-timeout=299ms"], "node-confirm-timeout");
});

test("--require-tls-files: only with auth on (TLS) and the certificate files given", () => {
  const files = ["--tls-cert-file=/tls/tls.crt", "--tls-key-file=/tls/tls.key"];
  const on = ["--node-id=n1", "--pod=p", "--namespace=ns"];
  assert.equal(cfg([...on, ...files, "--require-tls-files"]).requireTlsFiles, true);
  rejects([...on, "--require-tls-files"], "require-tls-files");
  rejects([...base, ...files, "--require-tls-files"], "require-tls-files");
});

test("upstream log levels: any verbosity from 1 is debug; --zap-log-level's own names taken as they are", () => {
  assert.equal(cfg([...base, "-v=1"]).logLevel, "debug");
  assert.equal(cfg([...base, "--zap-log-level=debug"]).logLevel, "debug");
  assert.equal(cfg([...base, "--zap-log-level=info"]).logLevel, "info");
  assert.equal(cfg([...base, "--zap-log-level=0"]).logLevel, "info");
});

test("upstream TLS name lists: one name is a list; an empty list is refused; a refusal names only the unknown names", () => {
  assert.equal(cfg([...base, "--tls-curve-preferences=X25519"]).tls.ecdhCurve, "X25519");
  assert.equal(cfg([...base, "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]).tls.ciphers?.split(":")[0], "ECDHE-RSA-AES128-GCM-SHA256");
  rejects([...base, "--tls-curve-preferences=,"], "tls-curve-preferences");
  const err = rejects([...base, "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_RSA_WITH_RC4_128_SHA"], "tls-cipher-suites");
  assert.match(err.message, /unsupported "TLS_RSA_WITH_RC4_128_SHA"; supported: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, /);
});

test("every declared default is the one applied: the config without a flag equals the config with --flag=<its default>", () => {
  const declared = FLAGS.filter((f) => f.default !== undefined);
  assert.ok(declared.length >= 15, `${declared.length} flags declare a default`);
  const required = ["--node-id=n1", "--pod=p", "--namespace=ns"];
  const plain = cfg(required);
  for (const f of declared) assert.deepEqual(cfg([...required, `--${f.name}=${f.default}`]), plain, `--${f.name}`);
});

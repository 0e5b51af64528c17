// The controller's configuration, parsed once (cli.test.ts runs the real process for --help,
// --version and the exit codes): each bad value names its flag, every default, every environment
// variable, flags over variables, and the `heal` subcommand's own flags.
import { test } from "node:test";
import assert from "node:assert/strict";
import { hostname } from "node:os";
import { ConfigError, FLAGS, HEAL_FLAGS, helpText, parseConfig, type Config, type HealCommand } from "../../../../controller/config/config.js";

const run = (argv: string[], env: NodeJS.ProcessEnv = {}): Config => {
  const r = parseConfig(argv, env);
  assert.equal(r.kind, "run");
  return (r as Extract<typeof r, { kind: "run" }>).config;
};
const heal = (argv: string[], env: NodeJS.ProcessEnv = {}): { config: Config; heal: HealCommand } => {
  const r = parseConfig(["heal", ...argv], env);
  assert.equal(r.kind, "heal");
  return r as Extract<typeof r, { kind: "heal" }>;
};
const LOCAL = ["--sidecar-tls=false"];

test("each bad value names its flag", () => {
  for (const [args, flag] of [
    [["--bogus"], "--bogus"],
    [[...LOCAL, "--check-interval=soon"], "--check-interval"],
    [[...LOCAL, "--per-node-concurrency=0"], "--per-node-concurrency"],
    [[...LOCAL, "--max-concurrent-heals=0"], "--max-concurrent-heals"],
    [[...LOCAL, "--max-attempts=0"], "--max-attempts"],
    [[...LOCAL, "--retry-initial-backoff=0s"], "--retry-initial-backoff"],
    [[...LOCAL, "--retry-max-backoff=0s"], "--retry-max-backoff"],
    [[...LOCAL, "--heal-timeout=0s"], "--heal-timeout"],
    [[...LOCAL, "--http-endpoint=nowhere"], "--http-endpoint"],
    [[...LOCAL, "--log-level=loud"], "--log-level"],
    [[...LOCAL, "--log-format=xml"], "--log-format"],
    [[...LOCAL, "--shutdown-grace=later"], "--shutdown-grace"],
    [[...LOCAL, "--leader-elect=maybe"], "--leader-elect"],
    [[...LOCAL, "--leader-election-retry-period=0s"], "--leader-election-retry-period"],
    [["--sidecar-tls=true"], "--sidecar-ca-file"],
    [[...LOCAL, "--leader-election-lease-duration=1s"], "renew-deadline"],
    [["heal", ...LOCAL], "--node"],
    [["heal", "--node=n", "--mode=sometimes", ...LOCAL], "--mode"],
    [["--node=n", ...LOCAL], "--node"],
  ] as const) {
    assert.throws(
      () => parseConfig([...args], {}),
      (e: Error) => e instanceof ConfigError && e.message.includes(flag),
      args.join(" "),
    );
  }
});

test("defaults: in a cluster, TLS verified against the CA and leader election on", () => {
  const c = run(["--sidecar-ca-file=/ca.crt"], { KUBERNETES_SERVICE_HOST: "10.0.0.1" });
  assert.deepEqual(c, {
    kubeconfig: undefined,
    namespace: undefined,
    checkIntervalMs: 300_000,
    restartHealMode: "always",
    perNodeConcurrency: 8,
    maxConcurrentHeals: 2048,
    maxAttempts: 5,
    backoffInitialMs: 500,
    backoffMaxMs: 30_000,
    healTimeoutMs: 180_000,
    sidecarTls: { enabled: true, caFile: "/ca.crt", serverName: undefined, insecureSkipVerify: false },
    tokenFile: undefined,
    tokenServiceAccount: undefined,
    tokenExpirationSeconds: 3600,
    endpoints: { serviceAccounts: [], allowUnverified: false },
    podRestarts: { enabled: false, perNode: 1, total: 10 },
    httpEndpoint: undefined,
    leader: {
      enabled: true,
      namespace: "default",
      name: "csi-addons-healer-controller",
      identity: hostname(),
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
    },
    logLevel: "info",
    logFormat: "json",
    shutdownGraceMs: 10_000,
    terminationLog: "/dev/termination-log",
  });
});

test("every setting from its environment variable (as deploy/ passes them)", () => {
  const c = run([], {
    KUBECONFIG: "/k",
    WATCH_NAMESPACE: "ceph-csi",
    CHECK_INTERVAL: "10m",
    RESTART_HEAL_MODE: "if-abnormal",
    PER_NODE_CONCURRENCY: "4",
    MAX_CONCURRENT_HEALS: "32",
    MAX_ATTEMPTS: "3",
    RETRY_INITIAL_BACKOFF: "1s",
    RETRY_MAX_BACKOFF: "1m",
    HEAL_TIMEOUT: "5m",
    SIDECAR_TLS: "true",
    SIDECAR_CA_FILE: "/etc/healer/ca.crt",
    SIDECAR_TLS_SERVER_NAME: "csi-addons-sidecar",
    SIDECAR_TLS_INSECURE_SKIP_VERIFY: "false",
    TOKEN_FILE: "/var/run/secrets/tokens/healer",
    HTTP_ENDPOINT: ":8080",
    LEADER_ELECT: "true",
    POD_NAMESPACE: "healer",
    LEADER_ELECTION_ID: "healer-lease",
    POD_NAME: "healer-7d9f-abcde",
    LOG_LEVEL: "debug",
    LOG_FORMAT: "text",
    SHUTDOWN_GRACE: "20s",
    TERMINATION_LOG: "/tmp/termination",
    RESTART_PODS_NOT_HEALED_IN_PLACE: "true",
    MAX_POD_RESTARTS_PER_NODE: "2",
    MAX_POD_RESTARTS: "20",
  });
  assert.deepEqual(c, {
    kubeconfig: "/k",
    namespace: "ceph-csi",
    checkIntervalMs: 600_000,
    restartHealMode: "if-abnormal",
    perNodeConcurrency: 4,
    maxConcurrentHeals: 32,
    maxAttempts: 3,
    backoffInitialMs: 1_000,
    backoffMaxMs: 60_000,
    healTimeoutMs: 300_000,
    sidecarTls: { enabled: true, caFile: "/etc/healer/ca.crt", serverName: "csi-addons-sidecar", insecureSkipVerify: false },
    tokenFile: "/var/run/secrets/tokens/healer",
    tokenServiceAccount: undefined,
    tokenExpirationSeconds: 3600,
    endpoints: { serviceAccounts: [], allowUnverified: false },
    podRestarts: { enabled: true, perNode: 2, total: 20 },
    httpEndpoint: { host: "::", port: 8080 },
    leader: {
      enabled: true,
      namespace: "healer",
      name: "healer-lease",
      identity: "healer-7d9f-abcde",
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
    },
    logLevel: "debug",
    logFormat: "text",
    shutdownGraceMs: 20_000,
    terminationLog: "/tmp/termination",
  });
});

test("flags win over environment variables; with a kubeconfig (local use) leader election is off unless asked for", () => {
  const c = run(
    [
      ...LOCAL,
      "--check-interval=1m",
      "--kubeconfig=/k",
      "--leader-election-lease-duration=30s",
      "--leader-election-renew-deadline=20s",
      "--leader-election-retry-period=5s",
    ],
    {
      CHECK_INTERVAL: "bogus",
      KUBERNETES_SERVICE_HOST: "10.0.0.1",
    },
  );
  assert.equal(c.checkIntervalMs, 60_000);
  assert.equal(c.leader.enabled, false, "off with a kubeconfig, even in a cluster");
  assert.deepEqual([c.leader.leaseDurationMs, c.leader.renewDeadlineMs, c.leader.retryPeriodMs], [30_000, 20_000, 5_000]);
  assert.equal(run([...LOCAL, "--kubeconfig=/k", "--leader-elect"]).leader.enabled, true);
  assert.equal(run(LOCAL, {}).leader.enabled, false, "outside a cluster without a kubeconfig: off");
  assert.equal(run([...LOCAL, "--check-interval=0"]).checkIntervalMs, 0, "0 turns the periodic pass off");
});

test("TLS: plaintext only when asked for; without verification only with the explicit flag", () => {
  assert.deepEqual(run(LOCAL).sidecarTls, { enabled: false, caFile: undefined, serverName: undefined, insecureSkipVerify: false });
  assert.deepEqual(run(["--sidecar-tls-insecure-skip-verify"]).sidecarTls, {
    enabled: true,
    caFile: undefined,
    serverName: undefined,
    insecureSkipVerify: true,
  });
});

test("a positive duration may be as short as 1 ms", () => {
  assert.equal(run([...LOCAL, "--heal-timeout=1ms"]).healTimeoutMs, 1);
});

test("the longest retry backoff is never below the first", () => {
  const c = run([...LOCAL, "--retry-initial-backoff=45s", "--retry-max-backoff=30s"]);
  assert.deepEqual([c.backoffInitialMs, c.backoffMaxMs], [45_000, 45_000]);
});

test("heal: --node required, --pv and --mode (if-abnormal by default); no leader election for a one-shot pass", () => {
  const h = heal(["--node=worker-1", ...LOCAL], { KUBERNETES_SERVICE_HOST: "10.0.0.1", LEADER_ELECT: "true" });
  assert.deepEqual(h.heal, { node: "worker-1", pv: undefined, mode: "if-abnormal" });
  assert.equal(h.config.leader.enabled, false);
  assert.deepEqual(heal(["--node=worker-1", "--pv=pv-7", "--mode=always", ...LOCAL]).heal, { node: "worker-1", pv: "pv-7", mode: "always" });
});

test("--help and --version are answers of their own, before any other value is checked", () => {
  assert.deepEqual(parseConfig(["--help", "--check-interval=soon"], {}), { kind: "help", text: helpText() });
  assert.deepEqual(parseConfig(["--version", "--sidecar-tls=true"], {}), { kind: "version" });
  const text = helpText();
  for (const line of [
    "Usage: csi-addons-healer-controller [flags]",
    "heal --node N",
    "--sidecar-ca-file",
    "--leader-election-retry-period",
    "heal subcommand:",
    "--mode",
  ]) {
    assert.ok(text.includes(line), line);
  }
});

test("every declared default is the one applied: the config without a flag equals the config with --flag=<its default>", () => {
  const declared = FLAGS.filter((f) => f.default !== undefined);
  assert.ok(declared.length >= 15, `${declared.length} flags declare a default`);
  const tls = ["--sidecar-ca-file=ca.pem"];
  const plain = run(tls);
  for (const f of declared) assert.deepEqual(run([...tls, `--${f.name}=${f.default}`]), plain, `--${f.name}`);
  for (const f of HEAL_FLAGS.filter((h) => h.default !== undefined)) {
    assert.deepEqual(heal([...tls, "--node=n", `--${f.name}=${f.default}`]), heal([...tls, "--node=n"]), `heal --${f.name}`);
  }
  for (const f of [...FLAGS, ...HEAL_FLAGS]) if (f.default) assert.ok(helpText().includes(`(default ${f.default})`), `--help shows --${f.name}'s default`);
});

// The controller's one typed configuration object, parsed and validated once; the only module
// that reads process.env (through the `env` argument). Same flag style as the sidecar.
import { checkLeaseTimings } from "../../common/election/timings.js";
import { hostname } from "node:os";
import { FlagError, parseFlags, usage, withDefaults, type FlagSpec } from "../../common/config/flags.js";
import { bool, duration, hostPort, int, oneOf, required } from "../../common/config/values.js";
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from "../../common/log/logger.js";

const HEAL_MODES = ["always", "if-abnormal"] as const;
type HealMode = (typeof HEAL_MODES)[number];
import { TERMINATION_LOG_FLAG, terminationLogOf } from "../../common/process/entry.js";

export { FlagError as ConfigError };

export interface SidecarTls {
  /** false: plaintext (local use only). */
  enabled: boolean;
  caFile: string | undefined;
  serverName: string | undefined;
  insecureSkipVerify: boolean;
}

export interface LeaderElection {
  enabled: boolean;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

export interface Config {
  kubeconfig: string | undefined;
  /** CSIAddonsNodes of this namespace only; undefined = all namespaces. */
  namespace: string | undefined;
  checkIntervalMs: number;
  /** What a restart gets: ALWAYS (re-stage every volume) or IF_ABNORMAL (heal only what the driver finds broken). */
  restartHealMode: HealMode;
  perNodeConcurrency: number;
  maxConcurrentHeals: number;
  /** Attempts of one call before its pass waits for the sidecar again. */
  maxAttempts: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  /** Deadline of one HealVolume call. */
  healTimeoutMs: number;
  sidecarTls: SidecarTls;
  /** The weaker choice: one token (a file) for every sidecar. */
  tokenFile: string | undefined;
  /** Our own ServiceAccount: a TokenRequest per node (audience csi-addons-healer/<node>) for that node's sidecars. */
  tokenServiceAccount: { namespace: string; name: string } | undefined;
  /** Lifetime asked for each per-node token (the API server may grant less). */
  tokenExpirationSeconds: number;
  /** Evicting pods a heal left with a dead mount: off unless asked for; bounded per node and in all. */
  podRestarts: { enabled: boolean; perNode: number; total: number };
  /** Which sidecar endpoints are called (controller/sidecars/verify.ts). */
  endpoints: { serviceAccounts: string[]; allowUnverified: boolean };
  httpEndpoint: { host: string; port: number } | undefined;
  leader: LeaderElection;
  logLevel: LogLevel;
  logFormat: LogFormat;
  shutdownGraceMs: number;
  /** Where a fatal exit's reason is written (the container's terminationMessagePath). */
  terminationLog: string;
}

export interface HealCommand {
  node: string;
  pv: string | undefined;
  mode: HealMode;
}

export type ParseResult =
  { kind: "run"; config: Config } | { kind: "heal"; config: Config; heal: HealCommand } | { kind: "help"; text: string } | { kind: "version" };

export const FLAGS: readonly FlagSpec[] = [
  { name: "kubeconfig", kind: "string", env: "KUBECONFIG", help: "kubeconfig file", defaultNote: "in-cluster" },
  { name: "namespace", kind: "string", env: "WATCH_NAMESPACE", help: "watch CSIAddonsNodes of this namespace only", defaultNote: "all" },
  { name: "check-interval", kind: "string", env: "CHECK_INTERVAL", help: "periodic IF_ABNORMAL pass per sidecar, jittered; 0 = off", default: "5m" },
  {
    name: "restart-heal-mode",
    kind: "string",
    env: "RESTART_HEAL_MODE",
    help: "always|if-abnormal: what every volume of a node gets after its driver or pod restarted; if-abnormal for drivers whose heal disrupts a live mount",
    default: "always",
  },
  { name: "per-node-concurrency", kind: "string", env: "PER_NODE_CONCURRENCY", help: "calls at once to one sidecar", default: "8" },
  {
    name: "max-concurrent-heals",
    kind: "string",
    env: "MAX_CONCURRENT_HEALS",
    help: "calls at once in the cluster: per-node-concurrency x the nodes that restart at once (a 10% rollout of 1000 nodes: 800 measured at once, 1600 if two waves overlap)",
    default: "2048",
  },
  {
    name: "max-attempts",
    kind: "string",
    env: "MAX_ATTEMPTS",
    help: "attempts of one heal on a retryable status: a volume that keeps failing is then given up; a sidecar that is down or busy is waited for again",
    default: "5",
  },
  { name: "retry-initial-backoff", kind: "string", env: "RETRY_INITIAL_BACKOFF", help: "first retry delay, doubled per attempt, jittered", default: "500ms" },
  { name: "retry-max-backoff", kind: "string", env: "RETRY_MAX_BACKOFF", help: "longest retry delay", default: "30s" },
  { name: "heal-timeout", kind: "string", env: "HEAL_TIMEOUT", help: "deadline of one HealVolume call", default: "3m" },
  { name: "sidecar-tls", kind: "bool", env: "SIDECAR_TLS", help: "TLS to the sidecars; false = plaintext, local use only", default: "true" },
  {
    name: "sidecar-ca-file",
    kind: "string",
    env: "SIDECAR_CA_FILE",
    help: "CA bundle that verifies the sidecars' certificates; read again when the file changes",
  },
  { name: "sidecar-tls-server-name", kind: "string", env: "SIDECAR_TLS_SERVER_NAME", help: "name the sidecars' certificates must carry" },
  {
    name: "sidecar-tls-insecure-skip-verify",
    kind: "bool",
    env: "SIDECAR_TLS_INSECURE_SKIP_VERIFY",
    help: "TLS without verifying the sidecars",
    default: "false",
  },
  {
    name: "service-account",
    kind: "string",
    env: "SERVICE_ACCOUNT",
    help: "<namespace>/<name> of the controller's own ServiceAccount: each node's sidecars get a token of their own, requested for it (TokenRequest, audience csi-addons-healer/<node>)",
  },
  {
    name: "sidecar-service-accounts",
    kind: "string",
    env: "SIDECAR_SERVICE_ACCOUNTS",
    help: "comma-separated <namespace>/<name>: a sidecar pod running as another ServiceAccount is not called",
    defaultNote: "any",
  },
  {
    name: "allow-unverified-endpoints",
    kind: "bool",
    env: "ALLOW_UNVERIFIED_ENDPOINTS",
    help: "UNSAFE, local use only: call CSIAddonsNodes whose endpoint is a plain host:port, which names no pod to verify (whoever writes one gets that node's token and calls)",
    default: "false",
  },
  {
    name: "restart-pods-not-healed-in-place",
    kind: "bool",
    env: "RESTART_PODS_NOT_HEALED_IN_PLACE",
    help: "evict (Eviction API, PodDisruptionBudgets respected) each pod a heal left with a dead mount, once; pods without a controller, or opted out by annotation, are only reported. Needs deploy/components/pod-restarts",
    default: "false",
  },
  { name: "max-pod-restarts-per-node", kind: "string", env: "MAX_POD_RESTARTS_PER_NODE", help: "evictions at once on one node", default: "1" },
  { name: "max-pod-restarts", kind: "string", env: "MAX_POD_RESTARTS", help: "evictions at once in the cluster", default: "10" },
  {
    name: "token-expiration",
    kind: "string",
    env: "TOKEN_EXPIRATION",
    help: "lifetime asked for each per-node token, renewed at 80%; at least 10m",
    default: "1h",
  },
  {
    name: "token-file",
    kind: "string",
    env: "TOKEN_FILE",
    help: "WEAKER than --service-account: one bearer token for every sidecar, re-read when it changes (a projected ServiceAccount token)",
  },
  { name: "http-endpoint", kind: "string", env: "HTTP_ENDPOINT", help: "host:port serving /healthz, /readyz, /metrics", defaultNote: "off" },
  { name: "leader-elect", kind: "bool", env: "LEADER_ELECT", help: "leader election on a Lease", defaultNote: "true in-cluster, false with --kubeconfig" },
  { name: "leader-election-namespace", kind: "string", env: "POD_NAMESPACE", help: "namespace of the Lease", defaultNote: "this pod's, else default" },
  { name: "leader-election-id", kind: "string", env: "LEADER_ELECTION_ID", help: "name of the Lease", default: "csi-addons-healer-controller" },
  { name: "leader-election-identity", kind: "string", env: "POD_NAME", help: "this replica's name in the Lease", defaultNote: "the hostname" },
  { name: "leader-election-lease-duration", kind: "string", help: "how long a standby waits before taking over", default: "15s" },
  { name: "leader-election-renew-deadline", kind: "string", help: "how long the leader tries to renew before giving up", default: "10s" },
  { name: "leader-election-retry-period", kind: "string", help: "time between acquire/renew attempts", default: "2s" },
  { name: "log-level", kind: "string", env: "LOG_LEVEL", help: "error|warn|info|debug", default: "info" },
  { name: "log-format", kind: "string", env: "LOG_FORMAT", help: "json|text", default: "json" },
  {
    name: "shutdown-grace",
    kind: "string",
    env: "SHUTDOWN_GRACE",
    help: "time heals in flight get to answer on SIGTERM before they are cancelled",
    default: "10s",
  },
  TERMINATION_LOG_FLAG,
  { name: "version", kind: "bool", help: "print the version and exit" },
  { name: "help", kind: "bool", help: "print this help and exit" },
];

export const HEAL_FLAGS: readonly FlagSpec[] = [
  { name: "node", kind: "string", help: "the Kubernetes node whose volumes to heal (required)" },
  { name: "pv", kind: "string", help: "only this PersistentVolume" },
  { name: "mode", kind: "string", help: "always|if-abnormal", default: "if-abnormal" },
];

export function helpText(): string {
  return [
    "Usage: csi-addons-healer-controller [flags]",
    "       csi-addons-healer-controller heal --node N [--pv P] [--mode always|if-abnormal] [flags]",
    usage(FLAGS),
    "heal subcommand:",
    usage(HEAL_FLAGS),
  ].join("\n");
}

export function parseConfig(argv: readonly string[], env: NodeJS.ProcessEnv): ParseResult {
  const isHeal = argv[0] === "heal";
  const specs = isHeal ? [...FLAGS, ...HEAL_FLAGS] : FLAGS;
  const given = parseFlags(specs, isHeal ? argv.slice(1) : argv, env);
  const raw = withDefaults(specs, given);
  if (given.has("help") && bool(raw, "help")) return { kind: "help", text: helpText() };
  if (given.has("version") && bool(raw, "version")) return { kind: "version" };
  const kubeconfig = raw.get("kubeconfig") || undefined;
  const inCluster = !kubeconfig && Boolean(env["KUBERNETES_SERVICE_HOST"]);
  const tls: SidecarTls = {
    enabled: bool(raw, "sidecar-tls"),
    caFile: raw.get("sidecar-ca-file") || undefined,
    serverName: raw.get("sidecar-tls-server-name") || undefined,
    insecureSkipVerify: bool(raw, "sidecar-tls-insecure-skip-verify"),
  };
  if (tls.enabled && !tls.caFile && !tls.insecureSkipVerify) {
    throw new FlagError(
      "sidecar-ca-file",
      "--sidecar-ca-file is required with TLS (or --sidecar-tls-insecure-skip-verify, or --sidecar-tls=false for local use)",
    );
  }
  const backoffInitialMs = positive(raw, "retry-initial-backoff");
  const config: Config = {
    kubeconfig,
    namespace: raw.get("namespace") || undefined,
    checkIntervalMs: duration(raw, "check-interval"),
    restartHealMode: oneOf(raw, "restart-heal-mode", HEAL_MODES),
    perNodeConcurrency: int(raw, "per-node-concurrency", 1),
    maxConcurrentHeals: int(raw, "max-concurrent-heals", 1),
    maxAttempts: int(raw, "max-attempts", 1),
    backoffInitialMs,
    backoffMaxMs: Math.max(backoffInitialMs, positive(raw, "retry-max-backoff")),
    healTimeoutMs: positive(raw, "heal-timeout"),
    sidecarTls: tls,
    tokenFile: raw.get("token-file") || undefined,
    tokenServiceAccount: serviceAccount(raw),
    tokenExpirationSeconds: Math.round(duration(raw, "token-expiration") / 1000),
    endpoints: { serviceAccounts: serviceAccounts(raw), allowUnverified: bool(raw, "allow-unverified-endpoints") },
    podRestarts: {
      enabled: bool(raw, "restart-pods-not-healed-in-place"),
      perNode: int(raw, "max-pod-restarts-per-node", 1),
      total: int(raw, "max-pod-restarts", 1),
    },
    httpEndpoint: hostPort(raw, "http-endpoint"),
    leader: {
      enabled: !isHeal && (raw.has("leader-elect") ? bool(raw, "leader-elect") : inCluster),
      namespace: raw.get("leader-election-namespace") || "default",
      name: raw.get("leader-election-id") ?? "",
      identity: raw.get("leader-election-identity") || hostname(),
      leaseDurationMs: positive(raw, "leader-election-lease-duration"),
      renewDeadlineMs: positive(raw, "leader-election-renew-deadline"),
      retryPeriodMs: positive(raw, "leader-election-retry-period"),
    },
    logLevel: oneOf(raw, "log-level", LOG_LEVELS),
    logFormat: oneOf(raw, "log-format", LOG_FORMATS),
    shutdownGraceMs: duration(raw, "shutdown-grace"),
    terminationLog: terminationLogOf(raw),
  };
  checkLeaseTimings(config.leader);
  if (config.tokenFile && config.tokenServiceAccount)
    throw new FlagError(
      "token-file",
      "--token-file and --service-account exclude each other: per-node tokens (--service-account) or one token for every sidecar (--token-file)",
    );
  if (config.tokenExpirationSeconds < 600) throw new FlagError("token-expiration", "--token-expiration must be at least 10m (the TokenRequest API's minimum)");
  if (!isHeal) return { kind: "run", config };
  const heal: HealCommand = {
    node: required(raw, "node"),
    pv: raw.get("pv") || undefined,
    mode: oneOf(raw, "mode", HEAL_MODES),
  };
  return { kind: "heal", config, heal };
}

function serviceAccount(raw: ReadonlyMap<string, string>): { namespace: string; name: string } | undefined {
  const v = raw.get("service-account");
  if (!v) return undefined;
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(v);
  if (!m) throw new FlagError("service-account", `--service-account must be <namespace>/<name>, got ${JSON.stringify(v)}`);
  return { namespace: m[1]!, name: m[3]! };
}

function serviceAccounts(raw: ReadonlyMap<string, string>): string[] {
  const v = raw.get("sidecar-service-accounts") ?? "";
  const list = v
    .split(",")
    .map((x) => x.trim())
    .filter((x) => x !== "");
  for (const sa of list) {
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(sa)) {
      throw new FlagError("sidecar-service-accounts", `--sidecar-service-accounts takes <namespace>/<name>, comma-separated; got ${JSON.stringify(sa)}`);
    }
  }
  return list;
}

function positive(raw: ReadonlyMap<string, string>, name: string): number {
  const ms = duration(raw, name);
  if (ms <= 0) throw new FlagError(name, `--${name} must be positive`);
  return ms;
}

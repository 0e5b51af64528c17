// The one typed configuration object: parsed and validated once, defaults applied here only.
// This is the only module that reads process.env (through the `env` argument of parseConfig).
import { checkLeaseTimings } from "../../common/election/timings.js";
import { FlagError as ConfigError, parseFlags, usage, withDefaults, type FlagSpec } from "../../common/config/flags.js";
import { ANY_ADDRESS, bool, duration, hostPort, int, oneOf, required } from "../../common/config/values.js";
import { IGNORED_FLAGS, MAPPED_FLAGS, UpstreamFlagError, tlsPolicy, upstreamLogFormat, upstreamLogLevel, type TlsPolicy } from "./upstream.js";

import { nodeAudience } from "../../common/auth/audience.js";
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from "../../common/log/logger.js";
import { TERMINATION_LOG_FLAG, terminationLogOf } from "../../common/process/entry.js";
export type { LogFormat, LogLevel };
/** Names a flag; main.ts exits 2 with its message. */
export { ConfigError };
/** Every address, IPv6 and IPv4 (a dual-stack socket); see common/net/listen-host.ts for IPv4-only nodes. */
export { ANY_ADDRESS };

/** In --auth-audience: "the API server's own audiences" (a TokenReview without spec.audiences). */
export const API_SERVER_AUDIENCE = "@api-server";
/** In --auth-audience: this node's audience, csi-addons-healer/<node-id> (common/auth/audience.ts). */
export const NODE_AUDIENCE = "@node";

export interface AuthzRule {
  verb: string;
  group: string;
  resource: string;
}

export interface Config {
  /** unix:// address of the driver's CSI-Addons server. */
  csiAddonsAddress: string;
  /** Filesystem path of that socket. */
  csiAddonsSocket: string;
  nodeId: string;
  pod: string;
  namespace: string;
  /** Empty when not given; then read from the Pod object. */
  podUid: string;
  controllerPort: number;
  /** Listen address; "::" (the default) is every address, IPv6 and IPv4. */
  controllerIp: string;
  stagingPath: string;
  /** Deadline of one driver call. */
  timeoutMs: number;
  /** undefined = no HTTP endpoint. */
  httpEndpoint: { host: string; port: number } | undefined;
  kubeconfig: string | undefined;
  /** The API server as every pod sees it (KUBERNETES_SERVICE_HOST/PORT), used without --kubeconfig. */
  inClusterApi: { host: string | undefined; port: string | undefined };
  maxInflight: number;
  /** Requests allowed to wait for a driver slot beyond maxInflight; past it RESOURCE_EXHAUSTED. */
  maxQueue: number;
  logLevel: LogLevel;
  logFormat: LogFormat;
  enableAuth: boolean;
  /** Audiences a caller's token may carry (@node expanded); API_SERVER_AUDIENCE stands for the API server's own. */
  authAudiences: string[];
  /** Verb, group and resource of the SubjectAccessReview; per service its family is the subresource. */
  authz: AuthzRule;
  /** The weaker choice: one SubjectAccessReview (authz, no subresource) for every service. */
  authSinglePermission: boolean;
  authCacheTtlMs: number;
  tlsCertFile: string | undefined;
  tlsKeyFile: string | undefined;
  /** --tls-min-version, --tls-cipher-suites, --tls-curve-preferences, as node:tls options. */
  tls: TlsPolicy;
  /** The Lease of a controller plugin's sidecars (upstream's --leader-election-* flags). */
  leaderElection: LeaderElectionConfig;
  /** Upstream sidecar flags that were given and mean nothing here; each is named in one warning. */
  ignoredFlags: { flag: string; why: string }[];
  /** Exit when the certificate files are not usable at start, instead of serving a self-signed pair. */
  requireTlsFiles: boolean;
  /** How long SIGTERM waits for in-flight calls. */
  shutdownGraceMs: number;
  /** How long secrets stay cached. */
  secretCacheTtlMs: number;
  /** Ready only while the API confirmed the CSIAddonsNode within this long (re-read every third of it). */
  nodeConfirmTimeoutMs: number;
  /** Where a fatal exit writes its reason (the container's terminationMessagePath). */
  terminationLog: string;
  /** How long a PersistentVolume read may serve health checks (a PV watch drops changed ones); 0 = never cached. */
  pvCacheTtlMs: number;
}

export interface LeaderElectionConfig {
  /** Where the Lease lives; default the pod's namespace. */
  namespace: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

export type ParseResult = { kind: "config"; config: Config } | { kind: "help"; text: string } | { kind: "version" };

export const FLAGS: readonly FlagSpec[] = [
  { name: "csi-addons-address", kind: "string", env: "CSI_ADDONS_ENDPOINT", help: "driver's CSI-Addons socket", default: "unix:///run/csi-addons/socket" },
  { name: "node-id", kind: "string", env: "NODE_ID", help: "Kubernetes node name (required)" },
  { name: "pod", kind: "string", env: "POD_NAME", help: "this pod's name (required)" },
  { name: "namespace", kind: "string", env: "POD_NAMESPACE", help: "this pod's namespace (required)" },
  { name: "pod-uid", kind: "string", env: "POD_UID", help: "this pod's UID (read from the Pod when empty)" },
  { name: "controller-port", kind: "string", env: "CONTROLLER_PORT", help: "port of the controller-facing gRPC server", default: "9070" },
  { name: "controller-ip", kind: "string", env: "CONTROLLER_IP", help: "listen address of that server", defaultNote: "::, every IPv6 and IPv4 address" },
  { name: "stagingpath", kind: "string", env: "STAGING_PATH", help: "kubelet's CSI staging root", default: "/var/lib/kubelet/plugins/kubernetes.io/csi/" },
  { name: "timeout", kind: "string", env: "TIMEOUT", help: "deadline of one driver call", default: "3m" },
  {
    name: "http-endpoint",
    kind: "string",
    env: "HTTP_ENDPOINT",
    help: "host:port serving /healthz, /readyz, /metrics; :port is every address",
    defaultNote: "off",
  },
  { name: "kubeconfig", kind: "string", env: "KUBECONFIG", help: "kubeconfig file", defaultNote: "in-cluster" },
  { name: "max-inflight", kind: "string", env: "MAX_INFLIGHT", help: "driver calls at once", default: "16" },
  {
    name: "max-queue",
    kind: "string",
    env: "MAX_QUEUE",
    help: "requests waiting for a driver slot before RESOURCE_EXHAUSTED",
    defaultNote: "4 x max-inflight",
  },
  {
    name: "log-level",
    kind: "string",
    env: "LOG_LEVEL",
    help: "error|warn|info|debug; when not given, -v or --zap-log-level of the upstream sidecar decide",
    default: "info",
  },
  { name: "log-format", kind: "string", env: "LOG_FORMAT", help: "json|text; when not given, the upstream sidecar's --zap-encoder decides", default: "json" },
  {
    name: "enable-auth",
    kind: "bool",
    env: "ENABLE_AUTH",
    help: "TLS + bearer-token authentication of callers; when not given, the upstream sidecar's --enable-authentication decides",
    default: "true",
  },
  {
    name: "auth-audience",
    kind: "string",
    env: "AUTH_AUDIENCE",
    help: `comma-separated audiences a caller's token may carry; ${NODE_AUDIENCE} = this node's (csi-addons-healer/<node-id>), ${API_SERVER_AUDIENCE} = the API server's own`,
    default: `${NODE_AUDIENCE},${API_SERVER_AUDIENCE}`,
  },
  { name: "auth-verb", kind: "string", env: "AUTH_VERB", help: "SubjectAccessReview verb", default: "call" },
  { name: "auth-group", kind: "string", env: "AUTH_GROUP", help: "SubjectAccessReview API group", default: "csiaddons.openshift.io" },
  {
    name: "auth-resource",
    kind: "string",
    env: "AUTH_RESOURCE",
    help: "SubjectAccessReview resource; each service family is its subresource (heal, reclaimspace, ...)",
    default: "csiaddonsnodes",
  },
  {
    name: "auth-weaker-single-permission",
    kind: "bool",
    env: "AUTH_WEAKER_SINGLE_PERMISSION",
    help: "WEAKER: one permission (--auth-verb on --auth-resource, no subresource) opens every service, as before per-service authorization",
    default: "false",
  },
  { name: "auth-cache-ttl", kind: "string", env: "AUTH_CACHE_TTL", help: "how long an auth decision is cached", default: "30s" },
  { name: "tls-cert-file", kind: "string", env: "TLS_CERT_FILE", help: "server certificate", defaultNote: "self-signed" },
  { name: "tls-key-file", kind: "string", env: "TLS_KEY_FILE", help: "server key" },
  {
    name: "require-tls-files",
    kind: "bool",
    env: "REQUIRE_TLS_FILES",
    help: "exit if the TLS files are not usable at start; never self-signed",
    default: "false",
  },
  { name: "shutdown-grace", kind: "string", env: "SHUTDOWN_GRACE", help: "time for in-flight calls on SIGTERM", default: "25s" },
  { name: "secret-cache-ttl", kind: "string", env: "SECRET_CACHE_TTL", help: "how long a stage secret is cached", default: "10s" },
  { name: "leader-election-namespace", kind: "string", help: "namespace of the controller plugin's Lease", defaultNote: "--namespace" },
  { name: "leader-election-lease-duration", kind: "string", help: "how long a Lease holder is trusted without renewing", default: "15s" },
  { name: "leader-election-renew-deadline", kind: "string", help: "how long the holder keeps retrying to renew before it lets go", default: "10s" },
  { name: "leader-election-retry-period", kind: "string", help: "time between tries to acquire or renew the Lease", default: "5s" },
  ...MAPPED_FLAGS,
  ...IGNORED_FLAGS.map(({ why: _why, ...spec }) => spec),
  {
    name: "node-confirm-timeout",
    kind: "string",
    env: "NODE_CONFIRM_TIMEOUT",
    help: "not ready when the API has not confirmed the CSIAddonsNode for this long; re-read every third of it",
    default: "90s",
  },
  TERMINATION_LOG_FLAG,
  {
    name: "pv-cache-ttl",
    kind: "string",
    env: "PV_CACHE_TTL",
    help: "how long a PV's watch serves it to requests before it is watched anew; 0 = read on every request",
    default: "10m",
  },
  { name: "version", kind: "bool", help: "print the version and exit" },
  { name: "help", kind: "bool", help: "print this help and exit" },
];

export function helpText(): string {
  return `Usage: csi-addons-sidecar [flags]\n${usage(FLAGS)}`;
}

export function parseConfig(argv: readonly string[], env: NodeJS.ProcessEnv): ParseResult {
  const given = parseFlags(FLAGS, argv, env);
  const raw = withDefaults(FLAGS, given);
  const str = (name: string) => raw.get(name) ?? "";
  if (given.has("help") && bool(raw, "help")) return { kind: "help", text: helpText() };
  if (given.has("version") && bool(raw, "version")) return { kind: "version" };

  // The upstream sidecar also takes a bare socket path (its default is /run/csi-addons/socket).
  const socket = str("csi-addons-address");
  const address = socket.startsWith("/") ? `unix://${socket}` : socket;
  if (!/^unix:\/\/\/?./.test(address)) {
    throw new ConfigError("csi-addons-address", `--csi-addons-address must be unix:///path/to/socket or /path/to/socket, got ${JSON.stringify(socket)}`);
  }
  // --enable-auth wins over the upstream sidecar's --enable-authentication.
  const enableAuth = bool(raw, given.has("enable-auth") || !given.has("enable-authentication") ? "enable-auth" : "enable-authentication");
  const maxInflight = int(raw, "max-inflight", 1);
  const config: Config = {
    csiAddonsAddress: address,
    csiAddonsSocket: address.replace(/^unix:\/\//, "").replace(/^\/+/, "/"),
    nodeId: required(raw, "node-id"),
    pod: required(raw, "pod"),
    namespace: required(raw, "namespace"),
    podUid: str("pod-uid"),
    controllerPort: int(raw, "controller-port", 0, 65535),
    controllerIp: str("controller-ip") || ANY_ADDRESS,
    stagingPath: str("stagingpath"),
    timeoutMs: duration(raw, "timeout"),
    httpEndpoint: hostPort(raw, "http-endpoint"),
    kubeconfig: raw.get("kubeconfig") || undefined,
    inClusterApi: { host: env["KUBERNETES_SERVICE_HOST"], port: env["KUBERNETES_SERVICE_PORT"] },
    maxInflight,
    maxQueue: raw.has("max-queue") ? int(raw, "max-queue", 0) : maxInflight * 4,
    // --log-level and --log-format win over the upstream sidecar's -v, --zap-log-level and --zap-encoder.
    logLevel: (!given.has("log-level") && upstream(() => upstreamLogLevel(raw))) || oneOf(raw, "log-level", LOG_LEVELS),
    logFormat: (!given.has("log-format") && upstream(() => upstreamLogFormat(raw))) || oneOf(raw, "log-format", LOG_FORMATS),
    enableAuth,
    authAudiences: audienceList(raw, required(raw, "node-id")),
    authz: { verb: str("auth-verb"), group: str("auth-group"), resource: str("auth-resource") },
    authSinglePermission: bool(raw, "auth-weaker-single-permission"),
    authCacheTtlMs: duration(raw, "auth-cache-ttl"),
    tlsCertFile: raw.get("tls-cert-file") || undefined,
    tlsKeyFile: raw.get("tls-key-file") || undefined,
    tls: upstream(() => tlsPolicy(raw)),
    leaderElection: leaderElection(raw),
    ignoredFlags: IGNORED_FLAGS.filter((f) => given.has(f.name)).map((f) => ({ flag: `--${f.name}`, why: f.why })),
    requireTlsFiles: bool(raw, "require-tls-files"),
    shutdownGraceMs: duration(raw, "shutdown-grace"),
    secretCacheTtlMs: duration(raw, "secret-cache-ttl"),
    nodeConfirmTimeoutMs: duration(raw, "node-confirm-timeout"),
    terminationLog: terminationLogOf(raw),
    pvCacheTtlMs: duration(raw, "pv-cache-ttl"),
  };
  if (!config.tlsCertFile !== !config.tlsKeyFile) {
    const missing = config.tlsCertFile ? "tls-key-file" : "tls-cert-file";
    throw new ConfigError(missing, "--tls-cert-file and --tls-key-file must be given together");
  }
  if (config.requireTlsFiles && (!enableAuth || !config.tlsCertFile)) {
    throw new ConfigError("require-tls-files", "--require-tls-files needs --enable-auth (TLS) and --tls-cert-file/--tls-key-file");
  }
  if (config.timeoutMs <= 0) throw new ConfigError("timeout", "--timeout must be positive");
  if (config.nodeConfirmTimeoutMs < 300) throw new ConfigError("node-confirm-timeout", "--node-confirm-timeout must be at least 300ms");
  return { kind: "config", config };
}

function upstream<T>(parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (err instanceof UpstreamFlagError) throw new ConfigError(err.flag, err.message);
    throw err;
  }
}

function leaderElection(raw: ReadonlyMap<string, string>): LeaderElectionConfig {
  const le = {
    namespace: raw.get("leader-election-namespace") || raw.get("namespace") || "",
    leaseDurationMs: duration(raw, "leader-election-lease-duration"),
    renewDeadlineMs: duration(raw, "leader-election-renew-deadline"),
    retryPeriodMs: duration(raw, "leader-election-retry-period"),
  };
  checkLeaseTimings(le);
  return le;
}

function audienceList(raw: ReadonlyMap<string, string>, nodeId: string): string[] {
  const v = raw.get("auth-audience") ?? "";
  const list = v.split(",").map((a) => a.trim());
  if (list.some((a) => !a)) {
    throw new ConfigError("auth-audience", `--auth-audience must be a comma-separated list of audiences (or ${API_SERVER_AUDIENCE}), got ${JSON.stringify(v)}`);
  }
  return [...new Set(list.map((a) => (a === NODE_AUDIENCE ? nodeAudience(nodeId) : a)))];
}

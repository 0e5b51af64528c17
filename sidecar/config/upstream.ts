// Flags of the upstream csi-addons sidecar (csi-addons/kubernetes-csi-addons sidecar/main.go, its
// klog and controller-runtime zap flags, and its TLS options), so that swapping the upstream image
// for ours never breaks a DaemonSet or Deployment. Flags we also have are in config.ts under the
// same names. Here: those that mean something to us under another name (mapped) and those that
// do not (accepted, then named in one warning each).
import { createSecureContext } from "node:tls";
import type { FlagKind, FlagSpec } from "../../common/config/flags.js";
import type { LogFormat, LogLevel } from "./config.js";

const KLOG_OUTPUT = "klog output option: this sidecar writes JSON lines (or text, --log-format) to stdout";
const ZAP_OUTPUT = "zap output option: see --log-level and --log-format";
const VOLUME_CONDITION = "volume condition reporting is not implemented here; a controller asks GetVolumeHealth (sidecar.v1.VolumeHealer)";

/** Accepted and ignored, with the reason the warning gives. */
const ignored = (name: string, kind: FlagKind, why: string): FlagSpec & { why: string } => ({
  name,
  kind,
  why,
  help: `upstream sidecar flag, accepted and ignored (${why})`,
});

export const IGNORED_FLAGS: readonly (FlagSpec & { why: string })[] = [
  ...["logtostderr", "alsologtostderr", "one_output", "skip_headers", "skip_log_headers", "add_dir_header", "legacy_stderr_threshold_behavior"].map((name) =>
    ignored(name, "bool", KLOG_OUTPUT),
  ),
  ...["log_dir", "log_file", "log_file_max_size", "stderrthreshold", "vmodule", "log_backtrace_at"].map((name) => ignored(name, "string", KLOG_OUTPUT)),
  ignored("zap-devel", "bool", ZAP_OUTPUT),
  ignored("zap-stacktrace-level", "string", ZAP_OUTPUT),
  ignored("zap-time-encoding", "string", ZAP_OUTPUT),
  ignored("enable-volume-condition", "bool", VOLUME_CONDITION),
  ignored("volume-condition-interval", "string", VOLUME_CONDITION),
  ignored("volume-condition-recorders", "string", VOLUME_CONDITION),
];

/** Upstream flags that mean something here (the leader-election ones are in config.ts). */
export const MAPPED_FLAGS: readonly FlagSpec[] = [
  { name: "v", kind: "string", help: "klog verbosity of the upstream sidecar: 0 = --log-level=info, 1 and more = debug (--log-level wins)" },
  { name: "zap-log-level", kind: "string", help: "upstream sidecar's log level: debug|info|error or a verbosity (--log-level wins)" },
  { name: "zap-encoder", kind: "string", help: "upstream sidecar's log encoding: json|console (= --log-format json|text; --log-format wins)" },
  { name: "enable-authentication", kind: "bool", help: "the same as --enable-auth" },
  {
    name: "tls-min-version",
    kind: "string",
    env: "TLS_MIN_VERSION",
    help: "VersionTLS12|VersionTLS13: lowest TLS version of the controller port",
    default: "VersionTLS12",
  },
  {
    name: "tls-cipher-suites",
    kind: "string",
    env: "TLS_CIPHER_SUITES",
    help: "comma-separated Go cipher suite names for TLS 1.2 (TLS 1.3 suites are not configurable, as in Go)",
  },
  {
    name: "tls-curve-preferences",
    kind: "string",
    env: "TLS_CURVE_PREFERENCES",
    help: "comma-separated Go curve names (CurveP256, CurveP384, CurveP521, X25519, X25519MLKEM768, ...)",
  },
];

export class UpstreamFlagError extends Error {
  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(message);
  }
}

/** Log level from -v / --zap-log-level (klog and controller-runtime semantics), or undefined. */
export function upstreamLogLevel(raw: Map<string, string>): LogLevel | undefined {
  const verbosity = (flag: string, v: string): LogLevel => {
    if (!/^-?\d+$/.test(v)) throw new UpstreamFlagError(flag, `--${flag} must be an integer verbosity, got ${JSON.stringify(v)}`);
    return Number(v) > 0 ? "debug" : "info";
  };
  const zap = raw.get("zap-log-level");
  if (zap !== undefined) return zap === "debug" || zap === "info" || zap === "error" ? zap : verbosity("zap-log-level", zap);
  const v = raw.get("v");
  return v === undefined ? undefined : verbosity("v", v);
}

export function upstreamLogFormat(raw: Map<string, string>): LogFormat | undefined {
  const enc = raw.get("zap-encoder");
  if (enc === undefined) return undefined;
  if (enc === "json") return "json";
  if (enc === "console") return "text";
  throw new UpstreamFlagError("zap-encoder", `--zap-encoder must be json or console, got ${JSON.stringify(enc)}`);
}

/** What node:tls needs to behave as the upstream sidecar's Go tls.Config does with the same flags. */
export interface TlsPolicy {
  minVersion: "TLSv1.2" | "TLSv1.3";
  /** OpenSSL cipher list; undefined = Node's defaults. */
  ciphers?: string;
  /** OpenSSL group list; undefined = Node's defaults. */
  ecdhCurve?: string;
}

const VERSIONS: Record<string, TlsPolicy["minVersion"]> = { VersionTLS12: "TLSv1.2", VersionTLS13: "TLSv1.3" };

// Go's names (crypto/tls CipherSuites()) → OpenSSL's, for the suites Go supports and allows.
const CIPHERS: Record<string, string> = {
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: "ECDHE-ECDSA-AES128-GCM-SHA256",
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: "ECDHE-RSA-AES128-GCM-SHA256",
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: "ECDHE-ECDSA-AES256-GCM-SHA384",
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: "ECDHE-RSA-AES256-GCM-SHA384",
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-ECDSA-CHACHA20-POLY1305",
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-RSA-CHACHA20-POLY1305",
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA: "ECDHE-ECDSA-AES128-SHA",
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: "ECDHE-RSA-AES128-SHA",
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA: "ECDHE-ECDSA-AES256-SHA",
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA: "ECDHE-RSA-AES256-SHA",
  TLS_RSA_WITH_AES_128_GCM_SHA256: "AES128-GCM-SHA256",
  TLS_RSA_WITH_AES_256_GCM_SHA384: "AES256-GCM-SHA384",
  TLS_RSA_WITH_AES_128_CBC_SHA: "AES128-SHA",
  TLS_RSA_WITH_AES_256_CBC_SHA: "AES256-SHA",
};
// Go ignores TLS 1.3 suites in the list and always offers all three; so must we (Node would
// otherwise turn TLS 1.3 off for a list without them).
const TLS13_SUITES = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"];

const CURVES: Record<string, string> = {
  CurveP256: "P-256",
  CurveP384: "P-384",
  CurveP521: "P-521",
  X25519: "X25519",
  X25519MLKEM768: "X25519MLKEM768",
  SecP256r1MLKEM768: "SecP256r1MLKEM768",
  SecP384r1MLKEM1024: "SecP384r1MLKEM1024",
};

function names(raw: Map<string, string>, flag: string, table: Record<string, string>, extra: readonly string[] = []): string[] | undefined {
  const v = raw.get(flag);
  if (!v) return undefined;
  const list = v
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = list.filter((n) => !(n in table) && !extra.includes(n));
  if (unknown.length > 0 || list.length === 0) {
    throw new UpstreamFlagError(
      flag,
      `--${flag}: unsupported ${JSON.stringify(unknown.join(",") || v)}; supported: ${[...Object.keys(table), ...extra].join(", ")}`,
    );
  }
  return list.filter((n) => n in table).map((n) => table[n]!);
}

export function tlsPolicy(raw: Map<string, string>): TlsPolicy {
  const version = raw.get("tls-min-version") ?? "";
  const minVersion = VERSIONS[version];
  if (!minVersion) throw new UpstreamFlagError("tls-min-version", `--tls-min-version must be VersionTLS12 or VersionTLS13, got ${JSON.stringify(version)}`);
  const suites = names(raw, "tls-cipher-suites", CIPHERS, TLS13_SUITES);
  const curves = names(raw, "tls-curve-preferences", CURVES);
  const policy: TlsPolicy = { minVersion };
  if (suites) policy.ciphers = [...suites, ...TLS13_SUITES].join(":");
  if (curves) policy.ecdhCurve = curves.join(":");
  // This OpenSSL may lack a group (the ML-KEM hybrids need OpenSSL 3.5): fail at start, not per
  // connection. Only a flag that was given is tried: each trial context costs ~2 ms of start-up.
  const tryContext = (flag: string, opts: { ciphers?: string; ecdhCurve?: string }) => {
    try {
      createSecureContext({ minVersion, ...opts });
    } catch (err) {
      throw new UpstreamFlagError(flag, `--${flag}: not supported by this runtime's OpenSSL ${process.versions.openssl}: ${(err as Error).message}`);
    }
  };
  if (suites) tryContext("tls-cipher-suites", { ciphers: policy.ciphers });
  if (curves) tryContext("tls-curve-preferences", { ecdhCurve: policy.ecdhCurve });
  return policy;
}

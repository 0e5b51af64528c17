// The process's one global: a winston logger writing one JSON object per line (or plain text).
// Child loggers carry request-scoped fields. Redaction is a last line of defence: code must not
// log secret values in the first place.
import winston from "winston";

export const LOG_FORMATS = ["json", "text"] as const;
export const LOG_LEVELS = ["error", "warn", "info", "debug"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
export type LogLevel = (typeof LOG_LEVELS)[number];

export type Logger = winston.Logger;

const SECRET_KEYS = new Set(["secrets", "token", "authorization", "password", "data", "stringdata", "bearer"]);

function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value instanceof Error) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = SECRET_KEYS.has(k.toLowerCase()) ? "***" : redact(v, depth + 1);
  }
  return out;
}

const redactFormat = winston.format((info) => {
  for (const key of Object.keys(info)) {
    if (SECRET_KEYS.has(key.toLowerCase())) info[key] = "***";
    else if (key !== "level" && key !== "message") info[key] = redact(info[key]);
  }
  return info;
});

let current: Logger = createLogger("info", "json");

/** `toStderr` for commands whose stdout is their result (e.g. the controller's heal table). */
export function createLogger(level: LogLevel, format: LogFormat, toStderr = false): Logger {
  const formats = [winston.format.timestamp(), redactFormat(), winston.format.errors({ stack: false })];
  const output =
    format === "json"
      ? winston.format.json()
      : winston.format.printf(({ timestamp, level: lvl, message, ...rest }) => {
          const fields = Object.entries(rest)
            .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
            .join(" ");
          return `${String(timestamp)} ${lvl.toUpperCase()} ${String(message)}${fields ? " " + fields : ""}`;
        });
  return winston.createLogger({
    level,
    format: winston.format.combine(...formats, output),
    // stdout for everything: kubelet collects both streams, and one stream keeps lines ordered.
    transports: [new winston.transports.Console(toStderr ? { stderrLevels: ["error", "warn", "info", "debug"] } : {})],
  });
}

export function setLogger(logger: Logger): void {
  current = logger;
}

export function log(): Logger {
  return current;
}

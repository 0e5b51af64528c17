// Typed readers of raw flag values (from parseFlags), each throwing a FlagError that names the
// flag, so every program reports a bad value the same way (exit 2, one line).
import { FlagError } from "./flags.js";
import { parseDuration } from "./duration.js";

/** Every address, IPv6 and IPv4 (a dual-stack socket): what `:port` listens on. */
export const ANY_ADDRESS = "::";

export function required(raw: Map<string, string>, name: string): string {
  const v = raw.get(name);
  if (!v) throw new FlagError(name, `--${name} is required`);
  return v;
}

export function bool(raw: Map<string, string>, name: string, dflt: boolean): boolean {
  const v = raw.get(name);
  if (v === undefined) return dflt;
  if (/^(1|t|true)$/i.test(v)) return true;
  if (/^(0|f|false)$/i.test(v)) return false;
  throw new FlagError(name, `--${name} must be true or false, got ${JSON.stringify(v)}`);
}

export function int(raw: Map<string, string>, name: string, dflt: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const v = raw.get(name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < min || n > max) {
    throw new FlagError(name, `--${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return n;
}

export function duration(raw: Map<string, string>, name: string, dflt: number): number {
  const v = raw.get(name);
  if (v === undefined) return dflt;
  const ms = parseDuration(v);
  if (ms === undefined) throw new FlagError(name, `--${name} must be a duration like 30s or 3m, got ${JSON.stringify(v)}`);
  return ms;
}

export function oneOf<T extends string>(raw: Map<string, string>, name: string, allowed: readonly T[], dflt: T): T {
  const v = raw.get(name) ?? dflt;
  if (!(allowed as readonly string[]).includes(v)) {
    throw new FlagError(name, `--${name} must be one of ${allowed.join("|")}, got ${JSON.stringify(v)}`);
  }
  return v as T;
}

export function hostPort(raw: Map<string, string>, name: string): { host: string; port: number } | undefined {
  const v = raw.get(name);
  if (!v) return undefined;
  const m = /^(.*):(\d+)$/.exec(v);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) throw new FlagError(name, `--${name} must be host:port or :port, got ${JSON.stringify(v)}`);
  return { host: m[1]!.replace(/^\[|\]$/g, "") || ANY_ADDRESS, port };
}

// Typed readers of flag values (parseFlags, then withDefaults), each throwing a FlagError that
// names the flag, so every program reports a bad value the same way (exit 2, one line). A flag's
// default is declared once, in its FlagSpec; a reader asked for a flag with neither a value nor a
// default is a programming error.
import { FlagError } from "./flags.js";
import { parseDuration } from "./duration.js";

/** Every address, IPv6 and IPv4 (a dual-stack socket): what `:port` listens on. */
export const ANY_ADDRESS = "::";

export function required(raw: ReadonlyMap<string, string>, name: string): string {
  const v = raw.get(name);
  if (!v) throw new FlagError(name, `--${name} is required`);
  return v;
}

function valueOf(raw: ReadonlyMap<string, string>, name: string): string {
  const v = raw.get(name);
  if (v === undefined) throw new Error(`--${name} has no value and no declared default`);
  return v;
}

export function bool(raw: ReadonlyMap<string, string>, name: string): boolean {
  const v = valueOf(raw, name);
  if (/^(1|t|true)$/i.test(v)) return true;
  if (/^(0|f|false)$/i.test(v)) return false;
  throw new FlagError(name, `--${name} must be true or false, got ${JSON.stringify(v)}`);
}

export function int(raw: ReadonlyMap<string, string>, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const v = valueOf(raw, name);
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < min || n > max) {
    throw new FlagError(name, `--${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return n;
}

export function duration(raw: ReadonlyMap<string, string>, name: string): number {
  const v = valueOf(raw, name);
  const ms = parseDuration(v);
  if (ms === undefined) throw new FlagError(name, `--${name} must be a duration like 30s or 3m, got ${JSON.stringify(v)}`);
  return ms;
}

export function oneOf<T extends string>(raw: ReadonlyMap<string, string>, name: string, allowed: readonly T[]): T {
  const v = valueOf(raw, name);
  if (!(allowed as readonly string[]).includes(v)) {
    throw new FlagError(name, `--${name} must be one of ${allowed.join("|")}, got ${JSON.stringify(v)}`);
  }
  return v as T;
}

export function hostPort(raw: ReadonlyMap<string, string>, name: string): { host: string; port: number } | undefined {
  const v = raw.get(name);
  if (!v) return undefined;
  const m = /^(.*):(\d+)$/.exec(v);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) throw new FlagError(name, `--${name} must be host:port or :port, got ${JSON.stringify(v)}`);
  return { host: m[1]!.replace(/^\[|\]$/g, "") || ANY_ADDRESS, port };
}

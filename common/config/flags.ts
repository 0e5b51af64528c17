// Go `flag`-package style parsing, as every kubernetes-csi sidecar does it: `-name` or `--name`,
// `--name=value` or `--name value`; a boolean takes no separate value (`--x`, `--x=false`).
export type FlagKind = "string" | "bool";

export interface FlagSpec {
  name: string;
  kind: FlagKind;
  env?: string;
  help: string;
  /** The value when neither the flag nor its variable is set, as one would type it: applied by withDefaults, shown by usage. */
  default?: string;
  /** A default that depends on other flags or the environment, described for --help (the code computes it). */
  defaultNote?: string;
}

export class FlagError extends Error {
  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(message);
    this.name = "FlagError";
  }
}

/** Raw values by flag name; flags win over environment variables. */
export function parseFlags(specs: readonly FlagSpec[], argv: readonly string[], env: NodeJS.ProcessEnv): Map<string, string> {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const values = new Map<string, string>();
  for (const s of specs) {
    const v = s.env === undefined ? undefined : env[s.env];
    if (v !== undefined && v !== "") values.set(s.name, v);
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("-") || arg === "-" || arg === "--") {
      throw new FlagError(arg, `unexpected argument ${JSON.stringify(arg)}: flags look like --name=value`);
    }
    const body = arg.replace(/^--?/, "");
    const eq = body.indexOf("=");
    const name = eq < 0 ? body : body.slice(0, eq);
    const spec = byName.get(name);
    if (!spec) throw new FlagError(name, `unknown flag --${name}`);
    let value: string;
    if (eq >= 0) {
      value = body.slice(eq + 1);
    } else if (spec.kind === "bool") {
      value = "true";
    } else {
      if (i + 1 >= argv.length) throw new FlagError(name, `flag --${name} needs a value`);
      value = argv[++i]!;
    }
    values.set(name, value);
  }
  return values;
}

/** The given values (parseFlags) with every declared default filled in where nothing was given. */
export function withDefaults(specs: readonly FlagSpec[], given: ReadonlyMap<string, string>): Map<string, string> {
  const values = new Map(given);
  for (const s of specs) if (s.default !== undefined && !values.has(s.name)) values.set(s.name, s.default);
  return values;
}

export function usage(specs: readonly FlagSpec[]): string {
  return specs
    .map((s) => {
      const dflt = s.default !== undefined ? ` (default ${s.default === "" ? '""' : s.default})` : s.defaultNote ? ` (default ${s.defaultNote})` : "";
      return `  --${s.name}${s.kind === "bool" ? "" : " value"}${s.env ? ` (env ${s.env})` : ""}\n      ${s.help}${dflt}`;
    })
    .join("\n");
}

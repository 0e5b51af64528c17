// The flag parsing both programs share (Go flag-package style) and its typed readers: what is not a
// flag is refused as such, before any name is looked up, so the one-line error says what was wrong.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FlagError, parseFlags, usage, withDefaults, type FlagSpec } from "../../../../common/config/flags.js";
import { hostPort } from "../../../../common/config/values.js";

const SPECS: FlagSpec[] = [
  { name: "name", kind: "string", env: "NAME", help: "" },
  { name: "on", kind: "bool", help: "" },
];

test("a positional argument, a lone - and a lone -- are refused as arguments, not looked up as flags", () => {
  for (const arg of ["extra", "-", "--"]) {
    assert.throws(
      () => parseFlags(SPECS, ["--on", arg], {}),
      (e: unknown) => e instanceof FlagError && e.flag === arg && e.message === `unexpected argument ${JSON.stringify(arg)}: flags look like --name=value`,
      arg,
    );
  }
});

test("both dash forms, = or a separate value, bare booleans; flags win over non-empty environment variables", () => {
  assert.deepEqual(Object.fromEntries(parseFlags(SPECS, ["-name", "a", "--on"], {})), { name: "a", on: "true" });
  assert.deepEqual(Object.fromEntries(parseFlags(SPECS, ["--name=b=c", "-on=false"], { NAME: "env" })), { name: "b=c", on: "false" });
  assert.deepEqual(Object.fromEntries(parseFlags(SPECS, [], { NAME: "env" })), { name: "env" });
  assert.deepEqual(Object.fromEntries(parseFlags(SPECS, [], { NAME: "" })), {}, "an empty variable is unset");
  assert.throws(
    () => parseFlags(SPECS, ["--name"], {}),
    (e: unknown) => e instanceof FlagError && e.flag === "name" && /needs a value/.test(e.message),
  );
  assert.throws(
    () => parseFlags(SPECS, ["--nope=1"], {}),
    (e: unknown) => e instanceof FlagError && e.flag === "nope" && e.message === "unknown flag --nope",
  );
});

test("usage: a value placeholder for string flags only, and the environment variable when there is one", () => {
  assert.equal(usage(SPECS), "  --name value (env NAME)\n      \n  --on\n      ");
});

test("host:port values: a missing or out-of-range port names the flag; an empty host or [v6] is understood", () => {
  const raw = (v: string) => new Map([["http-endpoint", v]]);
  for (const bad of ["localhost", ":", "[::1]", "host:65536", "host:-1"]) {
    assert.throws(
      () => hostPort(raw(bad), "http-endpoint"),
      (e: unknown) =>
        e instanceof FlagError && e.flag === "http-endpoint" && e.message === `--http-endpoint must be host:port or :port, got ${JSON.stringify(bad)}`,
      bad,
    );
  }
  assert.deepEqual(hostPort(raw(":8080"), "http-endpoint"), { host: "::", port: 8080 });
  assert.deepEqual(hostPort(raw("[::1]:65535"), "http-endpoint"), { host: "::1", port: 65535 });
  assert.equal(hostPort(new Map(), "http-endpoint"), undefined);
});

test("a default is declared once: withDefaults fills it where nothing was given, and usage renders it (or the note of a computed one)", () => {
  const specs: FlagSpec[] = [
    { name: "timeout", kind: "string", help: "deadline", default: "3m" },
    { name: "queue", kind: "string", help: "waiting", defaultNote: "4 x inflight" },
    { name: "plain", kind: "string", help: "no default" },
  ];
  assert.deepEqual(Object.fromEntries(withDefaults(specs, new Map())), { timeout: "3m" });
  assert.deepEqual(Object.fromEntries(withDefaults(specs, new Map([["timeout", "5s"]]))), { timeout: "5s" }, "a given value stays");
  assert.equal(
    usage(specs),
    ["  --timeout value\n      deadline (default 3m)", "  --queue value\n      waiting (default 4 x inflight)", "  --plain value\n      no default"].join("\n"),
  );
});

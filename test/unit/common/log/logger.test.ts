// common/log: one JSON object per line (or text), request fields carried by child loggers, and the
// last line of defence for secrets: a field whose name says secret is written as "***", at any
// depth the logger looks (code must still never log a secret value in the first place).
import { test } from "node:test";
import assert from "node:assert/strict";
import winston from "winston";
import { createLogger } from "../../../../common/log/logger.js";

/** The logger's lines, its Console transport pointed at a buffer. */
function capture(format: "json" | "text", level: "info" | "debug" = "info") {
  const logger = createLogger(level, format);
  const out: string[] = [];
  const console = logger.transports[0] as winston.transports.ConsoleTransportInstance;
  (console as unknown as { log: (info: Record<symbol | string, unknown>, next: () => void) => void }).log = (info, next) => {
    out.push(String(info[Symbol.for("message")]));
    next();
  };
  return { logger, out };
}

test("secret fields are written as *** whatever their case, nested in objects and arrays; other fields as they are", () => {
  const { logger, out } = capture("json");
  logger.info("call", {
    pv: "pv-1",
    Authorization: "Bearer abc",
    secrets: { key: "s3cr3t" },
    request: { volumeId: "vol-1", secrets: { userKey: "AQD..." }, nested: [{ password: "hunter2" }, { token: "t0k3n", ok: 1 }] },
    StringData: { a: "b" },
    data: "c2VjcmV0",
    bearer: "x",
  });
  const line = JSON.parse(out[0]!) as Record<string, unknown>;
  assert.deepEqual(line, {
    level: "info",
    message: "call",
    timestamp: line["timestamp"],
    pv: "pv-1",
    Authorization: "***",
    secrets: "***",
    request: { volumeId: "vol-1", secrets: "***", nested: [{ password: "***" }, { token: "***", ok: 1 }] },
    StringData: "***",
    data: "***",
    bearer: "***",
  });
  for (const secret of ["abc", "s3cr3t", "AQD", "hunter2", "t0k3n", "c2VjcmV0"]) assert.ok(!out[0]!.includes(secret), secret);
  assert.ok(!Number.isNaN(Date.parse(String(line["timestamp"]))));
});

test("a child logger's fields are redacted too, and an error is logged by its message without a stack", () => {
  const { logger, out } = capture("json");
  logger.child({ method: "/sidecar.v1.VolumeHealer/HealVolume", token: "t0k3n" }).warn("refused", { error: new Error("permission denied") });
  const line = JSON.parse(out[0]!) as Record<string, unknown>;
  assert.equal(line["token"], "***");
  assert.equal(line["method"], "/sidecar.v1.VolumeHealer/HealVolume");
  assert.equal(line["level"], "warn");
  assert.ok(!out[0]!.includes("t0k3n"));
  assert.ok(!out[0]!.includes("at "), "no stack trace");
});

test("the logger looks 6 levels deep into objects and arrays; past that a value is left whole, so a cyclic or huge object cannot stall a call", () => {
  const { logger, out } = capture("json");
  const deep = { l1: { l2: { l3: { l4: { l5: { l6: { secrets: "hidden", l7: { secrets: "kept" } } } } } } } };
  const arrays = [[[[[[{ secrets: "hidden", deeper: [{ secrets: "kept" }] }]]]]]];
  logger.info("deep", { deep, arrays });
  const line = JSON.parse(out[0]!) as Record<string, any>;
  assert.equal(line["deep"].l1.l2.l3.l4.l5.l6.secrets, "***");
  assert.equal(line["deep"].l1.l2.l3.l4.l5.l6.l7.secrets, "kept");
  const sixth = line["arrays"][0][0][0][0][0][0];
  assert.deepEqual(sixth, { secrets: "***", deeper: [{ secrets: "kept" }] });
});

test("an Error logged as the message is its message, without a stack", () => {
  const { logger, out } = capture("json");
  logger.error(new Error("permission denied"));
  const line = JSON.parse(out[0]!) as Record<string, unknown>;
  assert.equal(line["message"], "permission denied");
  assert.equal(line["stack"], undefined);
});

test("everything goes to stdout (one stream keeps lines in order); a command whose stdout is its result logs to stderr", () => {
  const levels = (l: ReturnType<typeof createLogger>) =>
    Object.keys((l.transports[0] as unknown as { stderrLevels: Record<string, unknown> }).stderrLevels).sort();
  assert.deepEqual(levels(createLogger("info", "json")), []);
  assert.deepEqual(levels(createLogger("info", "json", true)), ["debug", "error", "info", "warn"]);
});

test("text format: one line with time, level and fields, secrets redacted; the level filters", () => {
  const { logger, out } = capture("text");
  logger.info("heal", { pv: "pv-1", result: { code: "OK" }, token: "t0k3n" });
  logger.debug("not shown");
  assert.equal(out.length, 1);
  assert.match(out[0]!, /^\d{4}-\d\d-\d\dT\S+ INFO heal pv=pv-1 result=\{"code":"OK"\} token=\*\*\*$/);
});

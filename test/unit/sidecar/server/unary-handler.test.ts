// server/: the one error→status mapping, the adapter that answers every grpc-js call exactly once,
// and the deadline and call-log middleware, in process over a hand-made grpc-js call.
// relay-contract.test.ts and auth.test.ts show the same through a sidecar process.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import * as grpc from "@grpc/grpc-js";
import { DomainError, type ErrorKind } from "../../../../sidecar/errors.js";
import { KubeError } from "../../../../sidecar/kube/api.js";
import { toStatus } from "../../../../sidecar/server/status.js";
import { MAX_METADATA_BYTES, unaryHandler } from "../../../../sidecar/server/unary-handler.js";
import { deadlineMiddleware, loggingMiddleware } from "../../../../sidecar/server/middlewares.js";
import type { CallContext, Middleware, Next } from "../../../../sidecar/server/context.js";
import { RepeatedLines } from "../../../../sidecar/log/repeats.js";
import type { RefusalReason } from "../../../../sidecar/metrics/metrics.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { waitFor } from "../../../support/wait.js";

const HEAL = "/sidecar.v1.VolumeHealer/HealVolume";
const HEALTH = "/sidecar.v1.VolumeHealer/GetVolumeHealth";

test("toStatus: each domain error kind has the gRPC code of its name and keeps its message", () => {
  const kinds: ErrorKind[] = [
    "InvalidArgument",
    "NotFound",
    "FailedPrecondition",
    "Unimplemented",
    "Unavailable",
    "ResourceExhausted",
    "DeadlineExceeded",
    "Cancelled",
    "Unauthenticated",
    "PermissionDenied",
    "Internal",
  ];
  for (const kind of kinds) {
    const code = grpc.status[kind.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase() as keyof typeof grpc.status];
    assert.equal(typeof code, "number", kind);
    assert.deepEqual(toStatus(new DomainError(kind, `why ${kind}`)), { code, details: `why ${kind}`, unexpected: false });
  }
});

test("toStatus: a driver's status passes through unchanged", () => {
  const driver = Object.assign(new Error("5 NOT_FOUND: volume vol-1 not staged"), {
    code: grpc.status.NOT_FOUND,
    details: "volume vol-1 not staged",
    metadata: new grpc.Metadata(),
  });
  assert.deepEqual(toStatus(driver), { code: grpc.status.NOT_FOUND, details: "volume vol-1 not staged", unexpected: false });
});

test("toStatus: the Kubernetes API unreachable, throttling or failing is UNAVAILABLE (retry); any other answer INTERNAL, logged in full", () => {
  for (const status of [0, 429, 500, 503]) {
    const st = toStatus(new KubeError(status, "Reason", "the\n  message"));
    assert.equal(st.code, grpc.status.UNAVAILABLE, String(status));
    assert.equal(st.unexpected, false);
  }
  assert.equal(
    toStatus(new KubeError(0, "ConnectionRefused", "connect ECONNREFUSED")).details,
    "Kubernetes API: unreachable ConnectionRefused: connect ECONNREFUSED",
  );
  assert.equal(
    toStatus(new KubeError(503, "ServiceUnavailable", "the\n  message")).details,
    "Kubernetes API: 503 ServiceUnavailable: the message",
    "whitespace folded to one line",
  );
  for (const status of [404, 422, 499]) {
    assert.deepEqual(toStatus(new KubeError(status, "Reason", "m")), {
      code: grpc.status.INTERNAL,
      details: `Kubernetes API: ${status} Reason: m`,
      unexpected: true,
    });
  }
});

test("toStatus: the Kubernetes API refusing the sidecar (403) is FAILED_PRECONDITION, an RBAC grant missing, not a sidecar bug", () => {
  assert.deepEqual(toStatus(new KubeError(403, "Forbidden", 'secrets "s" is forbidden')), {
    code: grpc.status.FAILED_PRECONDITION,
    details: `Kubernetes API: 403 Forbidden: secrets "s" is forbidden (the sidecar's ServiceAccount lacks a grant)`,
    unexpected: false,
  });
});

test("toStatus: anything else is INTERNAL without its text (it may hold what the caller must not see)", () => {
  assert.deepEqual(toStatus(new Error("token abc123 in /var/run/secret")), {
    code: grpc.status.INTERNAL,
    details: "internal error in the sidecar",
    unexpected: true,
  });
  assert.deepEqual(toStatus("a string"), { code: grpc.status.INTERNAL, details: "internal error in the sidecar", unexpected: true });
  assert.equal(toStatus({ code: 5 }).code, grpc.status.INTERNAL, "a code without details is no gRPC status");
});

type Answer = { err: grpc.ServiceError | Partial<grpc.StatusObject> | null; res?: unknown };

/** A grpc-js unary call as a handler sees it, and the one answer it gets. */
function fakeCall(o: { metadata?: grpc.Metadata; deadline?: grpc.Deadline; request?: unknown } = {}) {
  const events = new EventEmitter();
  const call = Object.assign(events, {
    request: o.request ?? { pvName: "pv-1" },
    metadata: o.metadata ?? new grpc.Metadata(),
    getPeer: () => "ipv4:10.0.0.7:41000",
    getDeadline: () => ("deadline" in o ? o.deadline : Infinity),
  });
  const answers: Answer[] = [];
  const callback = (err: Answer["err"], res?: unknown) => void answers.push({ err, res });
  return { call: call as unknown as grpc.ServerUnaryCall<unknown, unknown>, callback, answers, cancel: () => events.emit("cancelled") };
}

function run<Res>(impl: Next<unknown, Res>, o: Parameters<typeof fakeCall>[0] & { middlewares?: Middleware[] } = {}) {
  const { logger, lines } = captureLogger("debug");
  const c = fakeCall(o);
  unaryHandler(HEAL, impl, o.middlewares ?? [], logger)(c.call, c.callback as grpc.sendUnaryData<unknown>);
  return { ...c, lines };
}

test("unaryHandler: an answer, a rejection and a synchronous throw each give exactly one answer", async () => {
  const ok = run(async () => ({ result: "HEALED" }));
  await waitFor("answered", () => ok.answers.length === 1);
  assert.deepEqual(ok.answers[0], { err: null, res: { result: "HEALED" } });

  const rejected = run(async () => {
    throw new DomainError("NotFound", "PersistentVolume pv-1 not found");
  });
  await waitFor("answered", () => rejected.answers.length === 1);
  assert.equal(rejected.answers[0]!.err!.code, grpc.status.NOT_FOUND);
  assert.equal(rejected.answers[0]!.err!.details, "PersistentVolume pv-1 not found");
  assert.ok(rejected.answers[0]!.err!.metadata instanceof grpc.Metadata);

  const thrown = run(() => {
    throw new DomainError("InvalidArgument", "pv_name is empty");
  });
  await waitFor("answered", () => thrown.answers.length === 1);
  assert.equal(thrown.answers[0]!.err!.code, grpc.status.INVALID_ARGUMENT);
});

test("unaryHandler: a callback that throws is logged, never an unhandled rejection", async () => {
  const { logger, lines } = captureLogger("debug");
  const c = fakeCall();
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => void unhandled.push(e);
  process.on("unhandledRejection", onUnhandled);
  try {
    unaryHandler(
      HEAL,
      async () => ({}),
      [],
      logger,
    )(c.call, () => {
      throw new Error("stream already closed");
    });
    await waitFor("the failure logged", () => lines.some((l) => l["message"] === "answering a call failed"));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(unhandled, []);
    assert.deepEqual(
      lines.find((l) => l["message"] === "answering a call failed"),
      { level: "error", message: "answering a call failed", method: HEAL, error: "stream already closed" },
    );
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
});

test("unaryHandler: request metadata over 16 KiB (name + value + 32 per entry) is RESOURCE_EXHAUSTED before any middleware; at the limit it is served", async () => {
  const sized = (bytes: number) => {
    const md = new grpc.Metadata();
    md.set("x-pad", "v".repeat(bytes - "x-pad".length - 32));
    return md;
  };
  let reached = 0;
  const counting: Middleware = (req, ctx, next) => (reached++, next(req, ctx));
  const over = run(async () => ({}), { metadata: sized(MAX_METADATA_BYTES + 1), middlewares: [counting] });
  assert.equal(over.answers.length, 1, "answered at once");
  assert.equal(over.answers[0]!.err!.code, grpc.status.RESOURCE_EXHAUSTED);
  assert.equal(over.answers[0]!.err!.details, "request metadata larger than 16384 bytes");
  assert.equal(reached, 0);

  const at = run(async () => ({ ok: true }), { metadata: sized(MAX_METADATA_BYTES), middlewares: [counting] });
  await waitFor("answered", () => at.answers.length === 1);
  assert.equal(at.answers[0]!.err, null);
  assert.equal(reached, 1);
  assert.equal(MAX_METADATA_BYTES, 16 * 1024);
});

test("unaryHandler: the context a handler sees (method, peer, metadata, the caller's deadline), and middleware in order, the first outermost", async () => {
  const order: string[] = [];
  const mw =
    (name: string): Middleware =>
    async (req, ctx, next) => {
      order.push(`${name} in`);
      const res = await next(req, ctx);
      order.push(`${name} out`);
      return res;
    };
  const seen: CallContext[] = [];
  const md = new grpc.Metadata();
  md.set("authorization", "Bearer t");
  const at = new Date(Date.now() + 5_000);
  const r = run(async (_req, ctx) => (seen.push(ctx), order.push("handler"), {}), { metadata: md, deadline: at, middlewares: [mw("a"), mw("b")] });
  await waitFor("answered", () => r.answers.length === 1);
  assert.deepEqual(order, ["a in", "b in", "handler", "b out", "a out"]);
  const ctx = seen[0]!;
  assert.equal(ctx.method, HEAL);
  assert.equal(ctx.peer, "ipv4:10.0.0.7:41000");
  assert.equal(ctx.metadata, md);
  assert.equal(ctx.deadline, at.getTime());
  assert.deepEqual(ctx.fields, {});
  assert.equal(ctx.signal.aborted, false);

  const deadlines: number[] = [];
  for (const deadline of [Infinity, 12345, undefined as unknown as grpc.Deadline]) {
    const d = run(async (_req, c) => (deadlines.push(c.deadline), {}), { deadline });
    await waitFor("answered", () => d.answers.length === 1);
  }
  assert.deepEqual(deadlines, [Infinity, 12345, Infinity]);
});

test("unaryHandler: the caller cancelling aborts the handler's signal, with the reason", async () => {
  let signal: AbortSignal | undefined;
  const r = run((_req, ctx) => {
    signal = ctx.signal;
    return new Promise((_resolve, reject) => ctx.signal.addEventListener("abort", () => reject(new DomainError("Cancelled", "cancelled"))));
  });
  await waitFor("the handler started", () => signal !== undefined);
  r.cancel();
  assert.equal(signal!.aborted, true);
  assert.equal((signal!.reason as Error).message, "call cancelled by the caller");
  await waitFor("answered", () => r.answers.length === 1);
  assert.equal(r.answers[0]!.err!.code, grpc.status.CANCELLED);
});

function ctxOf(method: string, logger = captureLogger("debug").logger): CallContext {
  return {
    method,
    metadata: new grpc.Metadata(),
    peer: "ipv4:10.0.0.7:41000",
    deadline: Infinity,
    signal: new AbortController().signal,
    fields: { pv: "pv-1" },
    logger,
    user: { username: "system:serviceaccount:csi:healer" } as CallContext["user"],
  };
}

test("deadlineMiddleware: the handler's deadline is the smaller of the caller's and --timeout", async () => {
  const seen: number[] = [];
  const next: Next<unknown, unknown> = async (_r, ctx) => seen.push(ctx.deadline);
  const mw = deadlineMiddleware(30_000);
  const before = Date.now();
  await mw({}, { ...ctxOf(HEAL), deadline: Infinity }, next);
  await mw({}, { ...ctxOf(HEAL), deadline: before + 1_000 }, next);
  const after = Date.now();
  assert.ok(seen[0]! >= before + 30_000 && seen[0]! <= after + 30_000, "no caller deadline: --timeout");
  assert.equal(seen[1], before + 1_000, "the caller's, when sooner");
});

function logged(level = "debug") {
  const { logger, lines } = captureLogger(level);
  const refused: RefusalReason[] = [];
  const mw = loggingMiddleware({ repeats: new RepeatedLines(logger), onRefused: (r) => void refused.push(r) });
  return { mw, lines, refused, logger };
}

test("call log: a change served is logged at info with the call's fields; a routine read only at debug", async () => {
  const info = logged("info");
  const started = performance.now();
  await info.mw({}, ctxOf(HEAL, info.logger), () => new Promise((answer) => setTimeout(() => answer({}), 20)));
  const took = (performance.now() - started) / 1000;
  await info.mw({}, ctxOf(HEALTH, info.logger), async () => ({}));
  await info.mw({}, ctxOf("/identity.Identity/Probe", info.logger), async () => ({}));
  assert.equal(info.lines.length, 1);
  const line = info.lines[0]!;
  const duration = line["duration"] as number;
  // In seconds, the handler's 20 ms and no more than the whole call took (a timer may fire a ms early).
  assert.ok(duration >= 0.018 && duration <= took + 0.001, `duration ${duration} s of a call that took ${took} s`);
  assert.deepEqual(
    { ...line, duration: 0 },
    { level: "info", message: "call served", method: HEAL, pv: "pv-1", user: "system:serviceaccount:csi:healer", duration: 0, code: "OK" },
  );

  const debug = logged("debug");
  await debug.mw({}, ctxOf(HEALTH, debug.logger), async () => ({}));
  await debug.mw({}, ctxOf("/replication.Controller/GetVolumeReplicationInfo", debug.logger), async () => ({}));
  assert.deepEqual(
    debug.lines.map((l) => [l["level"], l["message"], l["code"]]),
    [
      ["debug", "call served", "OK"],
      ["debug", "call served", "OK"],
    ],
  );
});

test("call log: refusals counted by reason and logged at warn with the peer; unexpected failures at error with the cause; others at info; the error passes on", async () => {
  const { mw, lines, refused, logger } = logged();
  const fail = (method: string, err: unknown) => mw({}, ctxOf(method, logger), () => Promise.reject(err));
  const denied = new DomainError("PermissionDenied", "not allowed to heal");
  await assert.rejects(fail(HEAL, denied), (e) => e === denied);
  await assert.rejects(fail(HEAL, new DomainError("Unauthenticated", "no token")));
  assert.deepEqual(refused, ["permission_denied", "unauthenticated"]);
  const refusals = lines.filter((l) => l["message"] === "call refused");
  assert.deepEqual(
    refusals.map((l) => [l["level"], l["reason"], l["code"], l["error"], l["peer"]]),
    [
      ["warn", "permission_denied", "PERMISSION_DENIED", "not allowed to heal", "ipv4:10.0.0.7:41000"],
      ["warn", "unauthenticated", "UNAUTHENTICATED", "no token", "ipv4:10.0.0.7:41000"],
    ],
  );

  await assert.rejects(fail(HEAL, new Error("boom in a handler")));
  const unexpected = lines.find((l) => l["message"] === "call failed unexpectedly")!;
  assert.deepEqual(
    [unexpected["level"], unexpected["code"], unexpected["error"], unexpected["cause"]],
    ["error", "INTERNAL", "internal error in the sidecar", "boom in a handler"],
  );

  await assert.rejects(fail(HEALTH, new DomainError("NotFound", "PersistentVolume pv-1 not found")));
  const failed = lines.find((l) => l["message"] === "call failed")!;
  assert.deepEqual([failed["level"], failed["code"], failed["error"], failed["method"]], ["info", "NOT_FOUND", "PersistentVolume pv-1 not found", HEALTH]);
  assert.equal(refused.length, 2, "only refusals are counted as refusals");
});

test("call log: identical failures are written once (the rest summed up later), different ones each", async () => {
  const { mw, lines, logger } = logged();
  for (let i = 0; i < 5; i++)
    await assert.rejects(mw({}, ctxOf(HEAL, logger), () => Promise.reject(new DomainError("NotFound", "PersistentVolume pv-1 not found"))));
  await assert.rejects(mw({}, ctxOf(HEAL, logger), () => Promise.reject(new DomainError("NotFound", "PersistentVolume pv-2 not found"))));
  assert.deepEqual(
    lines.filter((l) => l["message"] === "call failed").map((l) => l["error"]),
    ["PersistentVolume pv-1 not found", "PersistentVolume pv-2 not found"],
  );
});

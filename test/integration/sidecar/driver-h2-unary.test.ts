// The sidecar's own gRPC client for the driver (sidecar/driver/h2-channel.ts, common/grpc/h2-unary.ts) against
// an HTTP/2 server on a unix socket that answers the way a driver, a broken driver or a dying one
// can: every outcome must be the status grpc-js would have given, so the driver's own statuses
// still reach the caller unchanged and a broken answer never looks like a good one.
import { after, afterEach, test } from "node:test";
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import { createServer as createNetServer } from "node:net";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { pathToFileURL } from "node:url";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import { DriverChannel, type ChannelState, type DriverChannelOptions } from "../../../sidecar/driver/h2-channel.js";
import type { CallError } from "../../../common/grpc/call-error.js";
import { MAX_RECEIVE_BYTES } from "../../../common/grpc/h2-unary.js";
import { rawMethod } from "../../../sidecar/driver/unary.js";
import { repoRoot, tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";

type Handler = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, body: Buffer) => void;

const method = rawMethod("/test.v1.Driver/Call");
const opened: { close(): void }[] = [];
afterEach(() => opened.splice(0).forEach((o) => o.close()));
after(() => opened.forEach((o) => o.close()));

/** A gRPC-shaped frame: compression flag, big-endian length, bytes. */
function frame(bytes: Buffer, { compressed = false, length = bytes.length } = {}): Buffer {
  const head = Buffer.alloc(5);
  head[0] = compressed ? 1 : 0;
  head.writeUInt32BE(length, 1);
  return Buffer.concat([head, bytes]);
}

/** An HTTP/2 server on `socket` (a fresh one by default); each stream is answered by `handler` once its request body is in. */
async function serve(
  handler: Handler,
  socket = join(tempDir(), "driver.sock"),
): Promise<{ socket: string; server: http2.Http2Server; sessions: http2.ServerHttp2Session[] }> {
  const server = http2.createServer();
  const sessions: http2.ServerHttp2Session[] = [];
  server.on("session", (s) => sessions.push(s));
  server.on("stream", (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("error", () => undefined);
    stream.on("end", () => handler(stream, headers, Buffer.concat(chunks)));
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  opened.push({ close: () => (sessions.forEach((s) => s.destroy()), server.close()) });
  return { socket, server, sessions };
}

async function channelTo(socket: string): Promise<DriverChannel> {
  const channel = new DriverChannel({ socketPath: socket, backoffMs: { initial: 20, max: 20 } });
  opened.push(channel);
  assert.equal(await channel.waitReady(Date.now() + 5_000), true, "the channel connects");
  return channel;
}

const call = (channel: DriverChannel, opts: { deadlineMs?: number; signal?: AbortSignal } = {}) =>
  channel.unary(method, Buffer.from("ping"), { deadline: Date.now() + (opts.deadlineMs ?? 5_000), signal: opts.signal });

async function failure(p: Promise<unknown>): Promise<CallError> {
  try {
    await p;
  } catch (err) {
    return err as CallError;
  }
  throw new Error("the call succeeded");
}

const ok = (stream: http2.ServerHttp2Stream, body: Buffer) => {
  stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
  stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
  stream.end(body);
};

test("a call sends one framed message with the gRPC headers and its deadline, and returns the answer's message", async () => {
  let seen: { headers: http2.IncomingHttpHeaders; body: Buffer } | undefined;
  const { socket } = await serve((stream, headers, body) => {
    seen = { headers, body };
    ok(stream, frame(Buffer.from("pong")));
  });
  const answer = await call(await channelTo(socket), { deadlineMs: 3_000 });
  assert.equal(answer.toString(), "pong");
  assert.equal(seen!.headers[":path"], "/test.v1.Driver/Call");
  assert.equal(seen!.headers["content-type"], "application/grpc");
  assert.equal(seen!.headers["te"], "trailers");
  const timeout = /^(\d+)m$/.exec(String(seen!.headers["grpc-timeout"]));
  assert.ok(timeout && Number(timeout[1]) <= 3_000 && Number(timeout[1]) > 2_000, `grpc-timeout ${seen!.headers["grpc-timeout"]}`);
  assert.deepEqual(seen!.body, frame(Buffer.from("ping")));
});

test("the driver's own status passes through: trailers-only and after headers, message percent-decoded, metadata kept", async () => {
  let n = 0;
  const { socket } = await serve((stream) => {
    if (n++ === 0) {
      stream.respond(
        { ":status": 200, "content-type": "application/grpc", "grpc-status": "5", "grpc-message": "volume caf%C3%A9 not found", "x-driver": "a" },
        { endStream: true },
      );
      return;
    }
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "10", "grpc-message": "volume is busy" }));
    stream.end();
  });
  const channel = await channelTo(socket);
  const first = await failure(call(channel));
  assert.equal(first.code, status.NOT_FOUND);
  assert.equal(first.details, "volume café not found");
  assert.deepEqual(
    Object.keys(first.metadata.getMap()).filter((k) => k.startsWith(":") || k.startsWith("grpc-") || k === "content-type"),
    [],
    "the peer's own metadata only: no pseudo-headers, grpc-* or content-type",
  );
  assert.deepEqual(first.metadata.get("x-driver"), ["a"]);
  const second = await failure(call(channel));
  assert.equal(second.code, status.ABORTED);
  assert.equal(second.details, "volume is busy");
});

test("broken answers get grpc-js's statuses: HTTP errors, another content type, compression, sizes, counts", async () => {
  const cases: { name: string; code: status; details?: RegExp; answer: (stream: http2.ServerHttp2Stream) => void }[] = [
    ...(
      [
        [400, status.INTERNAL],
        [401, status.UNAUTHENTICATED],
        [403, status.PERMISSION_DENIED],
        [404, status.UNIMPLEMENTED],
        [429, status.UNAVAILABLE],
        [500, status.UNKNOWN],
        [502, status.UNAVAILABLE],
        [503, status.UNAVAILABLE],
        [504, status.UNAVAILABLE],
      ] as const
    ).map(([http, code]) => ({
      name: `HTTP ${http}`,
      code,
      details: new RegExp(`HTTP status code ${http}`),
      answer: (s: http2.ServerHttp2Stream) => s.respond({ ":status": http }, { endStream: true }),
    })),
    { name: "not gRPC", code: status.UNKNOWN, answer: (s) => (s.respond({ ":status": 200, "content-type": "text/html" }), s.end("<html>")) },
    { name: "a compressed message", code: status.INTERNAL, answer: (s) => ok(s, frame(Buffer.from("pong"), { compressed: true })) },
    { name: "a message over the limit", code: status.RESOURCE_EXHAUSTED, answer: (s) => ok(s, frame(Buffer.alloc(8), { length: MAX_RECEIVE_BYTES + 1 })) },
    { name: "two messages", code: status.UNIMPLEMENTED, answer: (s) => ok(s, Buffer.concat([frame(Buffer.from("a")), frame(Buffer.from("b"))])) },
    { name: "OK and no message", code: status.UNIMPLEMENTED, answer: (s) => ok(s, Buffer.alloc(0)) },
    {
      name: "a message cut short",
      code: status.INTERNAL,
      details: /ended after 3 of 10 bytes/,
      answer: (s) => ok(s, frame(Buffer.from("pon"), { length: 10 })),
    },
    { name: "ended before any headers", code: status.INTERNAL, answer: (s) => s.close(http2.constants.NGHTTP2_NO_ERROR) },
    { name: "a cut length prefix", code: status.INTERNAL, answer: (s) => ok(s, Buffer.from([0, 0])) },
    {
      name: "no status at all",
      code: status.INTERNAL,
      answer: (s) => (s.respond({ ":status": 200, "content-type": "application/grpc" }), s.end(frame(Buffer.from("pong")))),
    },
    { name: "a refused stream", code: status.UNAVAILABLE, answer: (s) => s.close(http2.constants.NGHTTP2_REFUSED_STREAM) },
    {
      name: "a negative status",
      code: status.UNKNOWN,
      answer: (s) => s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "-1" }, { endStream: true }),
    },
    {
      name: "an unparsable status",
      code: status.UNKNOWN,
      answer: (s) => s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "x" }, { endStream: true }),
    },
  ];
  let answer: (stream: http2.ServerHttp2Stream) => void = () => undefined;
  const { socket } = await serve((stream) => answer(stream));
  const channel = await channelTo(socket);
  for (const c of cases) {
    answer = c.answer;
    const err = await failure(call(channel));
    assert.equal(err.code, c.code, `${c.name}: ${err.details}`);
    if (c.details) assert.match(err.details, c.details, c.name);
  }
  assert.equal(channel.state, "ready", "broken answers leave the connection in use");
});

test("the deadline ends a call the driver does not answer, and the driver's stream is reset", async () => {
  let reset: number | undefined;
  const { socket } = await serve((stream) => stream.on("close", () => (reset = stream.rstCode)));
  const err = await failure(call(await channelTo(socket), { deadlineMs: 150 }));
  assert.equal(err.code, status.DEADLINE_EXCEEDED);
  await waitFor("the driver's stream to be reset", () => reset === http2.constants.NGHTTP2_CANCEL);
});

test("cancelling ends the call CANCELLED and resets the driver's stream; an aborted signal never starts one", async () => {
  let arrived = 0;
  let reset: number | undefined;
  const { socket } = await serve((stream) => {
    arrived++;
    stream.on("close", () => (reset = stream.rstCode));
  });
  const channel = await channelTo(socket);
  const abort = new AbortController();
  const pending = failure(call(channel, { signal: abort.signal }));
  await waitFor("the call at the driver", () => arrived === 1);
  abort.abort();
  assert.equal((await pending).code, status.CANCELLED);
  await waitFor("the driver's stream to be reset", () => reset === http2.constants.NGHTTP2_CANCEL);
  assert.equal((await failure(call(channel, { signal: abort.signal }))).code, status.CANCELLED);
  assert.equal(arrived, 1, "nothing reached the driver for the call cancelled before it started");
});

test("a driver that goes away: calls in flight end UNAVAILABLE, new calls fail at once, and it is dialled again when back", async () => {
  let arrived = 0;
  const first = await serve(() => arrived++);
  const channel = await channelTo(first.socket);
  const pending = failure(call(channel));
  await waitFor("the call at the driver", () => arrived === 1);
  first.sessions.forEach((s) => s.destroy());
  first.server.close();
  assert.equal((await pending).code, status.UNAVAILABLE);
  await waitFor("the channel to see it gone", () => channel.state === "failure" || channel.state === "connecting");
  const early = await failure(call(channel));
  assert.equal(early.code, status.UNAVAILABLE);
  assert.match(early.details, /driver not connected/);

  // Back on the same path: the channel dials it again by itself.
  const { rmSync } = await import("node:fs");
  rmSync(first.socket, { force: true });
  await serve((stream) => ok(stream, frame(Buffer.from("again"))), first.socket);
  assert.equal(await channel.waitReady(Date.now() + 5_000), true);
  assert.equal((await call(channel)).toString(), "again");
});

test("a GOAWAY from the driver lets the call in flight finish and moves new calls to a new connection", async () => {
  const held: http2.ServerHttp2Stream[] = [];
  const { socket, sessions } = await serve((stream) => held.push(stream));
  const channel = await channelTo(socket);
  const pending = call(channel);
  await waitFor("the call at the driver", () => held.length === 1);
  sessions[0]!.goaway(http2.constants.NGHTTP2_NO_ERROR);
  await waitFor("a second connection", () => sessions.length === 2 && channel.state === "ready");
  ok(held[0]!, frame(Buffer.from("finished")));
  assert.equal((await pending).toString(), "finished");
  // The old connection closing at last must not take the new one with it.
  await waitFor("the old connection closed", () => sessions[0]!.closed || sessions[0]!.destroyed);
  const next = call(channel);
  await waitFor("the next call at the driver", () => held.length === 2);
  ok(held[1]!, frame(Buffer.from("new")));
  assert.equal((await next).toString(), "new");
  assert.equal(sessions.length, 2, "still the second connection");
});

test("closing the channel ends what is in flight UNAVAILABLE and it never dials again", async () => {
  let arrived = 0;
  const { socket, sessions } = await serve(() => arrived++);
  const channel = await channelTo(socket);
  const pending = failure(call(channel));
  await waitFor("the call at the driver", () => arrived === 1);
  channel.close();
  assert.equal((await pending).code, status.UNAVAILABLE);
  assert.equal(channel.state, "closed");
  assert.equal(await channel.waitReady(Date.now() + 100), false);
  assert.equal(sessions.length, 1);
});

/** A channel to a socket nobody serves yet, and how many times it has entered `counted`. */
function channelToNobody(backoffMs: { initial: number; max: number }, counted: ChannelState, timers?: DriverChannelOptions["timers"]) {
  const socket = join(tempDir(), "driver.sock");
  const channel = new DriverChannel({ socketPath: socket, backoffMs, timers });
  opened.push(channel);
  const seen = { count: 0 };
  channel.on("state", (s) => s === counted && seen.count++);
  return { socket, channel, seen };
}

test("a socket change seen while a dial is in flight: if that dial fails, the next goes at once, not after the backoff", async () => {
  const { socket, channel, seen: dials } = channelToNobody({ initial: 60_000, max: 60_000 }, "connecting");
  await waitFor("the first dial to fail (no socket yet)", () => channel.state === "failure");
  // The old socket removed: a change between attempts dials at once; then the new socket bound
  // while that dial is still in flight (it will fail: nothing listens yet).
  channel.dialNow();
  assert.equal(channel.state, "connecting");
  channel.dialNow();
  await serve(() => undefined, socket);
  // Not a minute of backoff: the dial after the failed one finds the driver.
  assert.equal(await channel.waitReady(Date.now() + 5_000), true);
  assert.ok(dials.count >= 2, `dials: ${dials.count}`);
});

test("a socket change starts the backoff over from a few milliseconds: a dial refused right after it is tried again soon", async () => {
  const { socket, channel, seen: failures } = channelToNobody({ initial: 50, max: 60_000 }, "failure");
  // Refused dials grow the backoff (50 ms x 1.6 each) until the next wait is several seconds.
  await waitFor("the backoff to grow past 3 s", () => failures.count >= 9, { timeoutMs: 30_000 });
  // A change, and the dial it makes refused too (bound, not listening yet: here, nothing at all).
  channel.dialNow();
  await waitFor("the dial after the change to fail", () => failures.count >= 10 && channel.state === "failure");
  await serve(() => undefined, socket);
  assert.equal(await channel.waitReady(Date.now() + 2_000), true, "dialled again within the shortest backoff, not after seconds");
});

test("large messages both ways (flow control): 3 MiB out, 3 MiB back, byte for byte", async () => {
  const { socket } = await serve((stream, _headers, body) => ok(stream, frame(Buffer.from(body.subarray(5)).reverse())));
  const out = Buffer.alloc(3 * 1024 * 1024);
  for (let i = 0; i < out.length; i++) out[i] = i % 251;
  const back = await (await channelTo(socket)).unary(method, out, { deadline: Date.now() + 10_000 });
  assert.equal(back.length, out.length);
  assert.ok(back.equals(Buffer.from(out).reverse()));
});

test("a call leaves no listener on its signal once it is answered: a signal shared by many calls (a controller's pass) does not collect them", async () => {
  const { EventEmitter } = await import("node:events");
  let n = 0;
  const { socket } = await serve((stream) =>
    n++ % 2 === 0 ? ok(stream, frame(Buffer.from("pong"))) : stream.respond({ ":status": 200, "grpc-status": "5" }, { endStream: true }),
  );
  const channel = await channelTo(socket);
  const shared = new AbortController();
  for (let i = 0; i < 4; i++) await call(channel, { signal: shared.signal }).catch(() => undefined);
  assert.equal(EventEmitter.getEventListeners(shared.signal, "abort").length, 0);
});

test("a session that cannot take another stream is reported unusable, so the channel dials a fresh one; the call fails UNAVAILABLE", async () => {
  const { h2Unary } = await import("../../../common/grpc/h2-unary.js");
  const { socket } = await serve((stream) => ok(stream, frame(Buffer.from("pong"))));
  const { connect } = await import("node:net");
  const session = http2.connect("http://localhost", { createConnection: () => connect(socket) });
  opened.push({ close: () => session.destroy() });
  await new Promise((resolve) => session.once("remoteSettings", resolve));
  // Refused at once, as a session out of stream ids is (ERR_HTTP2_OUT_OF_STREAMS after 2^31 calls).
  session.destroy();
  let unusable = 0;
  const err = await failure(h2Unary(session, method, Buffer.from("ping"), { deadline: Date.now() + 5_000 }, () => unusable++));
  assert.equal(err.code, status.UNAVAILABLE);
  assert.equal(unusable, 1);
});

test("a deadline past what milliseconds can say in 8 digits (~28 h) is sent in seconds", async () => {
  let timeout: string | undefined;
  const { socket } = await serve((stream, headers) => ((timeout = String(headers["grpc-timeout"])), ok(stream, frame(Buffer.from("pong")))));
  await call(await channelTo(socket), { deadlineMs: 2e8 });
  const m = /^(\d+)S$/.exec(timeout!);
  assert.ok(m && Number(m[1]) > 199_990 && Number(m[1]) <= 200_000, `grpc-timeout ${timeout}`);
});

/** The channel's waits between dials, recorded; each ends when the test says (fire()), not when its time is up. */
function recordedWaits() {
  const waits: number[] = [];
  const running = new Map<NodeJS.Timeout, () => void>();
  const timers = {
    set: (dial: () => void, ms: number) => {
      waits.push(ms);
      const handle = setTimeout(() => undefined, 0);
      running.set(handle, dial);
      return handle;
    },
    clear: (handle: NodeJS.Timeout | undefined) => void (handle && running.delete(handle)),
  };
  /** Ends every wait the channel has not cleared: one at most, or a dial would be doubled. */
  const fire = () => {
    const dials = [...running.values()];
    running.clear();
    for (const dial of dials) dial();
  };
  return { waits, timers, fire };
}

test("the waits between dials: 1.6x the last, ±20 %, up to the max, and the initial wait again after a connection that worked; a socket change between dials dials at once and starts over at 10 ms, one during a dial redials at once if it fails; a change while connected changes nothing", async () => {
  const { waits, timers, fire } = recordedWaits();
  // The constructor's own dial is made before anyone listens: the count is of the dials after it.
  const { socket, channel, seen: dials } = channelToNobody({ initial: 1_000, max: 5_000 }, "connecting", timers);
  const within = (ms: number, nominal: number) => ms >= nominal * 0.8 - 1e-9 && ms <= nominal * 1.2 + 1e-9;

  await waitFor("the first wait (no socket yet)", () => waits.length === 1);
  assert.equal(dials.count, 0, "the constructor's dial failed without another at once");
  for (let i = 2; i <= 6; i++) {
    fire();
    await waitFor(`wait ${i}`, () => waits.length === i);
  }
  const nominal = [1_000, 1_600, 2_560, 4_096, 5_000, 5_000];
  waits.forEach((ms, i) => assert.ok(within(ms, nominal[i]!), `wait ${i + 1}: ${ms} ms, not ${nominal[i]} ms ±20 %`));
  assert.ok(new Set(waits.map((ms, i) => (ms / nominal[i]!).toFixed(6))).size > 1, `jittered: ${waits.join(", ")}`);
  assert.equal(dials.count, 5);

  // A change between dials: a dial at once (the pending wait dropped); refused, it waits 10 ms.
  channel.dialNow();
  await waitFor("the wait after the change's dial", () => waits.length === 7);
  assert.equal(dials.count, 6);
  assert.ok(within(waits[6]!, 10), `after a socket change: ${waits[6]} ms`);

  // A change between dials, then another while that dial is in flight: refused, it redials at once, once.
  channel.dialNow();
  channel.dialNow();
  await waitFor("the wait after both dials", () => waits.length === 8);
  assert.equal(dials.count, 8);
  assert.ok(within(waits[7]!, 10), `the wait after the redial: ${waits[7]} ms`);

  // Connected: a change now is no dial and no shorter wait; losing the connection waits the initial 1 s.
  const { sessions } = await serve((stream, _h, body) => ok(stream, body), socket);
  fire();
  assert.equal(await channel.waitReady(Date.now() + 5_000), true);
  channel.dialNow();
  assert.equal(dials.count, 9);
  sessions[0]!.destroy();
  await waitFor("the wait after the lost connection", () => waits.length === 9);
  assert.ok(within(waits[8]!, 1_000), `after a connection that worked: ${waits[8]} ms`);
  assert.equal(dials.count, 9, "no dial before the wait is over");
});

test("the jitter spans the whole ±20 %: the lowest draw waits 0.8x, the highest 1.2x", async (t) => {
  // Spread over the whole band, sidecars that lost one driver do not dial it again in step.
  const { waits, timers, fire } = recordedWaits();
  // The lowest draw for the first wait, the highest for the second.
  const draws = [0, 1 - 1e-12];
  t.mock.method(Math, "random", () => draws[Math.min(waits.length, 1)]!);
  channelToNobody({ initial: 1_000, max: 5_000 }, "connecting", timers);
  await waitFor("the first wait", () => waits.length === 1);
  fire();
  await waitFor("the second wait", () => waits.length === 2);
  t.mock.restoreAll();
  assert.ok(Math.abs(waits[0]! - 800) < 1e-6, `lowest draw: ${waits[0]} ms`);
  assert.ok(Math.abs(waits[1]! - 1_920) < 1e-6, `highest draw: ${waits[1]} ms`);
});

/** A peer that takes the connection on a fresh socket and never says a word (no HTTP/2 SETTINGS). */
async function silentPeer(): Promise<{ socket: string; accepted: () => number }> {
  const socket = join(tempDir(), "silent.sock");
  let accepted = 0;
  const silent = createNetServer((conn) => (accepted++, conn.on("error", () => undefined)));
  await new Promise<void>((resolve) => silent.listen(socket, resolve));
  opened.push({ close: () => void silent.close() });
  return { socket, accepted: () => accepted };
}

test("a call while the connection is being made fails UNAVAILABLE at once (the peer accepted the socket but has not spoken HTTP/2)", async () => {
  const { socket, accepted } = await silentPeer();
  const channel = new DriverChannel({ socketPath: socket, backoffMs: { initial: 20, max: 20 } });
  opened.push(channel);
  await waitFor("the socket accepted", () => accepted() > 0);
  assert.equal(channel.state, "connecting");
  const err = await failure(call(channel, { deadlineMs: 10_000 }));
  assert.equal(err.code, status.UNAVAILABLE);
  assert.match(err.details, /driver not connected \(connecting\)/);
});

// A channel that waited for a state it can no longer reach would hold its caller until the deadline
// (or for ever): the test's own timeout is far shorter than the one asked for.
test("a closed channel answers waitReady (false) and waitNotReady at once", { timeout: 10_000 }, async () => {
  const channel = new DriverChannel({ socketPath: join(tempDir(), "driver.sock"), backoffMs: { initial: 20, max: 20 } });
  channel.close();
  assert.equal(await channel.waitReady(Date.now() + 60_000), false);
  await channel.waitNotReady();
});

test("no timer or connection of the channel keeps a program alive: waiting to dial, dialling a silent peer, connected", async () => {
  const { socket: silentSocket } = await silentPeer();
  const { socket: liveSocket, sessions } = await serve(() => undefined);
  const script = `
    const { DriverChannel } = await import(${JSON.stringify(pathToFileURL(join(repoRoot, "sidecar/driver/h2-channel.ts")).href)});
    const backoffMs = { initial: 60000, max: 60000 };
    for (const socketPath of ${JSON.stringify([join(tempDir(), "nobody.sock"), silentSocket, liveSocket])}) new DriverChannel({ socketPath, backoffMs });
  `;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: repoRoot, stdio: "ignore" });
  const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  const [code, signal] = (await once(child, "exit")) as [number | null, string | null];
  clearTimeout(killer);
  assert.equal(sessions.length, 1, "the program did connect to the live peer");
  assert.deepEqual([code, signal], [0, null], "it ended by itself, not killed after 15 s (the connect timeout is 20 s, the backoff 60 s)");
});

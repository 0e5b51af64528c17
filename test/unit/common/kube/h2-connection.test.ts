// The HTTP/2 connection both programs share with the API server: when the server retires it (a
// GOAWAY lets the requests in flight finish on the old connection while new ones go to a new
// one, which then carries every later request: kube-apiserver sends GOAWAY to rebalance clients,
// --goaway-chance), its pings, its timers, and a dial that never completes.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { createSecureServer, constants, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import { createServer as createTcpServer, type AddressInfo, type Socket } from "node:net";
import { createServer as createTlsServer } from "node:tls";
import { H2Connection, H2Refused, failure, type H2Options } from "../../../../common/kube/h2-connection.js";
import { readText } from "../../../../common/kube/request.js";
import { selfSignedCert } from "../../../kube/tls.js";
import { waitFor } from "../../../support/wait.js";
import { activeHandles } from "../../../support/handles.js";

test("GOAWAY: the request in flight finishes on the old connection, new ones go to one new connection and stay there", async (t) => {
  const cert = await selfSignedCert();
  let connections = 0;
  let closed = 0;
  let held: ServerHttp2Stream | undefined;
  const server = createSecureServer({ key: cert.key, cert: cert.cert });
  server.on("session", (session) => {
    connections++;
    session.once("close", () => closed++);
  });
  server.on("stream", (stream, headers) => {
    if (headers[":path"] === "/slow") {
      // Retire this connection, answer the headers, and hold the body until the test says so.
      stream.session!.goaway(constants.NGHTTP2_NO_ERROR, stream.id);
      stream.respond({ ":status": 200 });
      stream.write("first half, ");
      held = stream;
      return;
    }
    stream.respond({ ":status": 200 });
    stream.end(`served by connection ${connections}`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const conn = new H2Connection(new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`), { tls: { ca: cert.cert, rejectUnauthorized: true } });
  t.after(() => conn.close());
  const get = async (path: string) => readText((await conn.request("GET", path, {}, undefined, AbortSignal.timeout(5_000))).body);

  // The GOAWAY frame comes before the response's headers, so the old connection is retired by now.
  const slow = await conn.request("GET", "/slow", {}, undefined, AbortSignal.timeout(5_000));
  const slowBody = readText(slow.body);
  assert.equal(await get("/fast"), "served by connection 2");
  held!.end("second half");
  assert.equal(await slowBody, "first half, second half", "the request in flight finished on the retired connection");
  // Once its last stream is done the client closes the retired connection: that must not
  // disturb the new one.
  await waitFor("the retired connection to close", () => closed === 1);
  for (let i = 0; i < 3; i++) assert.equal(await get("/fast"), "served by connection 2", "later requests stay on the new connection");
  assert.equal(connections, 2);
});

test("the default pings: the first after 30 s of the connection, and its answer may take up to 15 s before the connection is dropped", async (t) => {
  const { connect, pings } = await h2Server(t);
  // The connection's own timers are mocked; sockets and AbortSignal.timeout run as usual.
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  const conn = connect();
  // One connection carries the frames in order: a ping sent before a request reaches the server
  // before it, so the server's count is exact once the request is answered.
  assert.equal(await get(conn), "ok");
  t.mock.timers.tick(29_999);
  assert.equal(await get(conn), "ok");
  assert.deepEqual(pings(), [0], "no ping before 30 s");

  t.mock.timers.tick(1);
  // 15 s pass before the answer can come in: not yet too long.
  t.mock.timers.tick(14_999);
  assert.equal(await get(conn), "ok");
  assert.deepEqual(pings(), [1], "pinged once, and the connection kept");
});

/** An h2 server answering "ok" at once, or holding the answer's body for `/held` until `release()`; it counts pings per connection. */
async function h2Server(t: TestContext) {
  const cert = await selfSignedCert();
  const sessions: { pings: number; session: ServerHttp2Session }[] = [];
  const held: ServerHttp2Stream[] = [];
  const server = createSecureServer({ key: cert.key, cert: cert.cert });
  server.on("session", (session) => {
    const s = { pings: 0, session };
    sessions.push(s);
    session.on("ping", () => void s.pings++);
  });
  server.on("stream", (stream, headers) => {
    stream.respond({ ":status": 200 });
    if (headers[":path"] === "/held") held.push(stream);
    else stream.end("ok");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const connect = (opts: Omit<H2Options, "tls"> = {}) => {
    const conn = new H2Connection(new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`), {
      ...opts,
      tls: { ca: cert.cert, rejectUnauthorized: true },
    });
    t.after(() => conn.close());
    return conn;
  };
  const release = () => held.splice(0).forEach((s) => s.end("released"));
  return { sessions, connect, release, pings: () => sessions.map((s) => s.pings) };
}

const get = async (conn: H2Connection, path = "/") => readText((await conn.request("GET", path, {}, undefined, AbortSignal.timeout(5_000))).body);

test("a ping still unanswered is not followed by another: the next goes out only after its answer", async (t) => {
  const { connect, pings } = await h2Server(t);
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  // A ping may go unanswered longer than the period between pings (the sidecar's options allow it).
  const conn = connect({ pingEveryMs: 1_000, pingTimeoutMs: 5_000 });
  assert.equal(await get(conn), "ok");
  // No turn of the event loop between the two periods: the first ping's answer cannot be in yet.
  t.mock.timers.tick(1_000);
  t.mock.timers.tick(1_000);
  assert.equal(await get(conn), "ok");
  assert.deepEqual(pings(), [1], "one ping while it was unanswered");
  // The answer came in before the request's (one connection, frames in order): the next period pings again.
  t.mock.timers.tick(1_000);
  assert.equal(await get(conn), "ok");
  assert.deepEqual(pings(), [2], "pinged again once answered, on the same connection");
});

test("a connection destroyed is not pinged in the turns before its close event (a ping then would throw)", async (t) => {
  const { connect, pings } = await h2Server(t);
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  const conn = connect({ pingEveryMs: 1_000 });
  assert.equal(await get(conn), "ok");
  // close() destroys the session at once; its "close" event, which stops the pings, comes later.
  conn.close();
  assert.doesNotThrow(() => t.mock.timers.tick(1_000), "the period came due on a destroyed session");
  assert.deepEqual(pings(), [0]);
});

test("one ping timer per connection, every 30 s by default, stopped when the connection closes", async (t) => {
  const { sessions, connect } = await h2Server(t);
  // The timers are real here (the period is asked of setInterval); only who asks is recorded.
  const started: { ms: number | undefined; timer: NodeJS.Timeout }[] = [];
  const stopped: unknown[] = [];
  const { setInterval: realSetInterval, clearInterval: realClearInterval } = globalThis;
  t.mock.method(globalThis, "setInterval", ((fn: () => void, ms?: number) => {
    const timer = realSetInterval(fn, ms);
    started.push({ ms, timer });
    return timer;
  }) as typeof setInterval);
  t.mock.method(globalThis, "clearInterval", ((timer?: NodeJS.Timeout) => {
    stopped.push(timer);
    realClearInterval(timer);
  }) as typeof clearInterval);
  const conn = connect();
  assert.equal(await get(conn), "ok");
  assert.equal(await get(conn), "ok");
  assert.deepEqual(
    started.map((s) => s.ms),
    [30_000],
    "one timer for the connection, every 30 s",
  );
  // The server ends the connection: its timer must go with it, or every reconnect leaves one
  // running for good, holding its dead session.
  sessions[0]!.session.destroy();
  await waitFor("the closed connection's ping timer to be stopped", () => stopped.includes(started[0]!.timer), { timeoutMs: 5_000 });
  assert.equal(await get(conn), "ok");
  assert.equal(sessions.length, 2, "the next request dialled anew");
  assert.deepEqual(
    started.map((s) => s.ms),
    [30_000, 30_000],
  );
});

test("a request keeps the program alive while it waits, even on a connection that was idle (and so let go of it)", async (t) => {
  const { connect, release } = await h2Server(t);
  // Each end of the connection is a TCP socket handle of this process; the client's counts only while referenced.
  const referenced = () => activeHandles("TCPSocketWrap");
  const before = referenced();
  const conn = connect();
  assert.equal(await get(conn), "ok");
  await waitFor("the idle connection to stop holding the program", () => referenced() === before + 1);
  const held = await conn.request("GET", "/held", {}, undefined, AbortSignal.timeout(5_000));
  assert.equal(referenced(), before + 2, "the waiting request holds the program again");
  release();
  assert.equal(await readText(held.body), "released");
  await waitFor("the connection, idle again, to let go", () => referenced() === before + 1);
});

test("a TLS server that names no protocol and then says nothing: refused at once, not after the request's deadline", async (t) => {
  const cert = await selfSignedCert();
  // Not an HTTP server behind it: the handshake completes without ALPN and the bytes sent go unanswered.
  const sockets = new Set<Socket>();
  // (Read and dropped, so that the socket sees the client's end and closes with it.)
  const server = createTlsServer({ key: cert.key, cert: cert.cert }, (socket) => void sockets.add(socket.resume()));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (sockets.forEach((s) => s.destroy()), server.close(() => r()))));
  const conn = new H2Connection(new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`), { tls: { ca: cert.cert, rejectUnauthorized: true } });
  t.after(() => conn.close());
  const signal = AbortSignal.timeout(30_000);
  await assert.rejects(conn.request("GET", "/", {}, undefined, signal), H2Refused);
  assert.equal(signal.aborted, false, "refused before the deadline");
  assert.equal(conn.refused, true);
});

/** A TCP server that takes connections and never says a word (a TLS handshake with it never ends). */
async function silentServer(t: TestContext) {
  const sockets: Socket[] = [];
  let accepted: () => void = () => {};
  const server = createTcpServer((socket) => {
    sockets.push(socket.resume());
    accepted();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (sockets.forEach((s) => s.destroy()), server.close(() => r()))));
  const url = new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`);
  return { url, sockets, nextConnection: () => new Promise<void>((r) => (accepted = r)) };
}

test("a dial whose TLS handshake never ends is given up after connectTimeoutMs, and the next request dials anew", async (t) => {
  const { url, sockets } = await silentServer(t);
  const conn = new H2Connection(url, { tls: { rejectUnauthorized: true }, connectTimeoutMs: 200 });
  t.after(() => conn.close());
  const signal = AbortSignal.timeout(30_000);
  const err: Error = await conn.request("GET", "/", {}, undefined, signal).then(
    () => assert.fail("answered"),
    (e: Error) => e,
  );
  assert.equal(signal.aborted, false, "given up before the request's deadline");
  assert.match(failure(err), /did not complete the TLS handshake within 200 ms/);
  await assert.rejects(conn.request("GET", "/", {}, undefined, AbortSignal.timeout(30_000)), /TLS handshake/);
  assert.equal(sockets.length, 2, "the second request did not wait on the first, stuck dial");
});

test("the default time for a dial's TLS handshake is 10 s", async (t) => {
  const { url, nextConnection } = await silentServer(t);
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const conn = new H2Connection(url, { tls: { rejectUnauthorized: true } });
  t.after(() => conn.close());
  const accepted = nextConnection();
  let settled = false;
  const answer = conn.request("GET", "/", {}, undefined, AbortSignal.timeout(30_000)).finally(() => (settled = true));
  answer.catch(() => {});
  await accepted;
  t.mock.timers.tick(9_999);
  await new Promise((r) => setImmediate(r));
  assert.equal(settled, false, "still waiting at 9.999 s");
  t.mock.timers.tick(1);
  await assert.rejects(answer, (e: Error) => /within 10000 ms/.test(failure(e)));
});

test("a server's limit of streams at once (kube-apiserver: 100): a request that finds every connection full dials another, never waits behind watches", async (t) => {
  const cert = await selfSignedCert();
  const held: ServerHttp2Stream[] = [];
  let sessions = 0;
  const server = createSecureServer({ key: cert.key, cert: cert.cert, settings: { maxConcurrentStreams: 3 } });
  server.on("session", () => sessions++);
  server.on("stream", (stream) => {
    // Each held open, as a watch is: the response's headers now, the body never.
    stream.respond({ ":status": 200 });
    stream.write("watching");
    held.push(stream);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (held.forEach((s) => s.close()), server.close(() => r()))));
  const conn = new H2Connection(new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`), { tls: { ca: cert.cert, rejectUnauthorized: true } });
  t.after(() => conn.close());
  // The first connection's SETTINGS have come once a request on it was answered.
  await conn.request("GET", "/watch/0", {}, undefined, AbortSignal.timeout(5_000));
  const more = await Promise.all([1, 2, 3, 4, 5, 6].map((i) => conn.request("GET", `/watch/${i}`, {}, undefined, AbortSignal.timeout(5_000))));
  assert.equal(more.length, 6, "every request answered while the others hold their streams");
  assert.equal(held.length, 7);
  assert.deepEqual([conn.connections, sessions], [3, 3], "3 streams on each connection");
});

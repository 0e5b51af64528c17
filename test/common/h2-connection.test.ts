// The HTTP/2 connection both programs share with the API server, when the server retires it: a
// GOAWAY lets the requests in flight finish on the old connection while new ones go to a new
// one, which then carries every later request (kube-apiserver sends GOAWAY to rebalance clients,
// --goaway-chance).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createSecureServer, constants, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { H2Connection } from "../../common/kube/h2-connection.js";
import { readText } from "../../common/kube/request.js";
import { selfSignedCert } from "../kube/tls.js";
import { waitFor } from "../support/wait.js";

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
  const cert = await selfSignedCert();
  const sessions: { pings: number }[] = [];
  const server = createSecureServer({ key: cert.key, cert: cert.cert });
  server.on("session", (session) => {
    const s = { pings: 0 };
    sessions.push(s);
    session.on("ping", () => void s.pings++);
  });
  server.on("stream", (stream) => {
    stream.respond({ ":status": 200 });
    stream.end("ok");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  // The connection's own timers are mocked; sockets and AbortSignal.timeout run as usual.
  t.mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
  const conn = new H2Connection(new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`), { tls: { ca: cert.cert, rejectUnauthorized: true } });
  t.after(() => conn.close());
  // One connection carries the frames in order: a ping sent before a request reaches the server
  // before it, so the server's count is exact once the request is answered.
  const get = async () => readText((await conn.request("GET", "/", {}, undefined, AbortSignal.timeout(5_000))).body);

  assert.equal(await get(), "ok");
  t.mock.timers.tick(29_999);
  assert.equal(await get(), "ok");
  assert.deepEqual(sessions, [{ pings: 0 }], "no ping before 30 s");

  t.mock.timers.tick(1);
  // 15 s pass before the answer can come in: not yet too long.
  t.mock.timers.tick(14_999);
  assert.equal(await get(), "ok");
  assert.deepEqual(sessions, [{ pings: 1 }], "pinged once, and the connection kept");
});

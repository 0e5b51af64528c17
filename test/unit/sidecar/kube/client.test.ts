// The sidecar's Kubernetes transport over TLS: HTTP/2 with one connection for everything, HTTP/1.1
// when the server does not speak h2, streams refused unprocessed sent again, and a ping that drops
// a connection that stopped answering.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { createServer as createTlsServer } from "node:tls";
import { createSecureServer } from "node:http2";
import * as net from "node:net";
import type { AddressInfo, Server, Socket } from "node:net";
import { KubeTransport } from "../../../../sidecar/kube/transport.js";
import { kubeconfigEndpoint } from "../../../../sidecar/kube/kubeconfig.js";
import { KubeError } from "../../../../sidecar/kube/api.js";
import { createKubeApi } from "../../../../sidecar/kube/client.js";
import { NAMESPACE as NS, namespace, upstreamCrdFile } from "../../../support/fixtures.js";
import { startKubeApi } from "../../../kube/index.js";
import { selfSignedCert } from "../../../kube/tls.js";
import { waitFor } from "../../../support/wait.js";

const NAMESPACE = "/api/v1/namespaces/default";
const get = (t: KubeTransport, ms = 5000) => t.request<{ metadata: { name: string } }>("GET", NAMESPACE, undefined, AbortSignal.timeout(ms));

test("over TLS, concurrent requests and a watch share one HTTP/2 connection", async (t) => {
  const api = await startKubeApi();
  t.after(() => api.stop());
  const transport = new KubeTransport(await kubeconfigEndpoint(api.kubeconfigPath));
  t.after(() => transport.close());
  const before = api.connectionsAccepted();
  const stop = new AbortController();
  const seen: string[] = [];
  const watching = transport.watch("/api/v1/namespaces?watch=true", stop.signal, (e) => seen.push(e.object["metadata"]?.name));
  const answers = await Promise.all(Array.from({ length: 32 }, () => get(transport)));
  assert.ok(answers.every((a) => a.metadata.name === "default"));
  await waitFor("the watch to deliver the existing namespaces", () => seen.includes("default"));
  assert.equal(api.connectionsAccepted() - before, 1, "32 requests in flight and a watch opened one connection");
  stop.abort();
  await watching;
});

/** The namespace, answered over HTTP/1.1 (saying which HTTP version carried the request). */
function answerHttp1(req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ metadata: { name: "default" }, via: req.httpVersion }));
}

/** Three requests through a transport to `server` all go over HTTP/1.1, and the caller is told so once. */
async function expectHttp1(t: TestContext, server: Server, ca: string): Promise<void> {
  const told: string[] = [];
  const transport = new KubeTransport(
    { server: new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`), ca: Buffer.from(ca), token: () => "t" },
    { onHttp1: (reason) => told.push(reason) },
  );
  t.after(() => transport.close());
  for (let i = 0; i < 3; i++) assert.deepEqual(await get(transport), { metadata: { name: "default" }, via: "1.1" });
  assert.deepEqual(told, ["the API server does not speak HTTP/2"]);
}

test("a TLS server without HTTP/2: requests go over HTTP/1.1, and the caller is told once", async (t) => {
  const cert = await selfSignedCert();
  let served = 0;
  const server = createHttpsServer({ key: cert.key, cert: cert.cert }, (req, res) => (served++, answerHttp1(req, res)));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  await expectHttp1(t, server, cert.cert);
  assert.equal(served, 3);
});

test("a TLS server that negotiates no protocol at all (no ALPN): requests go over HTTP/1.1", async (t) => {
  const cert = await selfSignedCert();
  // What an old proxy in front of the API server may be: TLS without ALPN, HTTP/1.1 inside. The
  // handshake succeeds and names no protocol, so the h2 session is given up at "connect".
  const http1 = createHttpServer(answerHttp1);
  // (http1 never listens, so it tracks no connections to close: the TLS server's are closed here.)
  const sockets = new Set<Socket>();
  const server = createTlsServer({ key: cert.key, cert: cert.cert }, (socket) => {
    sockets.add(socket);
    http1.emit("connection", socket);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (sockets.forEach((s) => s.destroy()), server.close(() => r()))));
  await expectHttp1(t, server, cert.cert);
});

test("requests sent before the server said how many streams it takes are sent again, not failed", async (t) => {
  const cert = await selfSignedCert();
  // A server that takes 2 streams at once; the 10 requests go out before its SETTINGS arrive.
  const server = createSecureServer({ key: cert.key, cert: cert.cert, settings: { maxConcurrentStreams: 2 } }, (_req, res) => {
    setTimeout(() => res.end(JSON.stringify({ metadata: { name: "default" } })), 20);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const transport = new KubeTransport({
    server: new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ca: Buffer.from(cert.cert),
    token: () => "t",
  });
  t.after(() => transport.close());
  const answers = await Promise.all(Array.from({ length: 10 }, () => get(transport)));
  assert.equal(answers.filter((a) => a.metadata.name === "default").length, 10);
});

/** A TCP relay to `port` whose existing connections can be frozen: open, but never passing another byte. */
async function freezableRelay(port: number) {
  const pairs: [net.Socket, net.Socket][] = [];
  const all = new Set<net.Socket>();
  let accepted = 0;
  let fromServer = 0;
  const relay = net.createServer((client) => {
    accepted++;
    const upstream = net.connect(port, "127.0.0.1");
    client.pipe(upstream).pipe(client);
    upstream.on("data", (chunk: Buffer) => (fromServer += chunk.length));
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    pairs.push([client, upstream]);
    for (const s of [client, upstream]) {
      all.add(s);
      s.once("close", () => all.delete(s));
    }
  });
  await new Promise<void>((r) => relay.listen(0, "127.0.0.1", r));
  return {
    port: (relay.address() as AddressInfo).port,
    accepted: () => accepted,
    /** Bytes the server has sent through the relay so far. */
    fromServer: () => fromServer,
    freeze() {
      for (const [client, upstream] of pairs.splice(0)) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
        client.once("close", () => upstream.destroy());
      }
    },
    close: () =>
      new Promise<void>((r) => {
        relay.close(() => r());
        for (const s of all) s.destroy();
      }),
  };
}

test("a connection that stops answering is dropped by its ping; the next request dials anew", async (t) => {
  const api = await startKubeApi();
  t.after(() => api.stop());
  const relay = await freezableRelay(Number(new URL(api.url).port));
  t.after(() => relay.close());
  const ep = await kubeconfigEndpoint(api.kubeconfigPath);
  const transport = new KubeTransport({ ...ep, server: new URL(`https://127.0.0.1:${relay.port}`) }, { pingEveryMs: 100, pingTimeoutMs: 200 });
  t.after(() => transport.close());
  assert.equal((await get(transport)).metadata.name, "default");
  // Idle, the connection is pinged and answers (each answer is bytes from the server): it is
  // pinged again after an answer, and an answered ping leaves it in place.
  for (let answers = 0; answers < 3; answers++) {
    const seen = relay.fromServer();
    await waitFor(`ping answer ${answers + 1} from the idle server`, () => relay.fromServer() > seen);
  }
  assert.equal((await get(transport)).metadata.name, "default");
  assert.equal(relay.accepted(), 1, "a connection that answers its pings is kept");
  relay.freeze();
  // Without the ping this request would wait out its whole 20 s deadline and end as a Timeout.
  await assert.rejects(get(transport, 20_000), (e: KubeError) => e instanceof KubeError && e.reason === "Unavailable" && /ping/.test(e.message));
  assert.equal((await get(transport)).metadata.name, "default");
  assert.equal(relay.accepted(), 2);
});

test("an unreachable TLS server names the connection's error, not the cancelled stream's", async () => {
  const transport = new KubeTransport({ server: new URL("https://127.0.0.1:1"), token: () => undefined });
  await assert.rejects(get(transport), (e: KubeError) => e instanceof KubeError && e.status === 0 && /ECONNREFUSED/.test(e.message));
  transport.close();
});

test("the server's certificate must be signed by the kubeconfig's CA: another CA's is refused (unreachable), unless insecure-skip-tls-verify", async (t) => {
  const api = await startKubeApi();
  t.after(() => api.stop());
  const ep = await kubeconfigEndpoint(api.kubeconfigPath);
  const stranger = await selfSignedCert();
  const wrongCa = new KubeTransport({ ...ep, ca: Buffer.from(stranger.cert) });
  t.after(() => wrongCa.close());
  await assert.rejects(get(wrongCa), (e: KubeError) => e instanceof KubeError && e.status === 0 && /CERT/.test(e.message));
  const skipping = new KubeTransport({ ...ep, ca: Buffer.from(stranger.cert), insecureSkipTlsVerify: true });
  t.after(() => skipping.close());
  assert.equal((await get(skipping)).metadata.name, "default");
});

test("HTTP/1.1 keeps its connections alive: three requests, one connection (TLS without h2, and plain HTTP)", async (t) => {
  const cert = await selfSignedCert();
  let connections = 0;
  const server = createHttpsServer({ key: cert.key, cert: cert.cert }, answerHttp1);
  server.on("secureConnection", () => connections++);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  await expectHttp1(t, server, cert.cert);
  assert.equal(connections, 1, "over TLS");

  const plain = await startKubeApi({ tls: false });
  t.after(() => plain.stop());
  const transport = new KubeTransport(await kubeconfigEndpoint(plain.kubeconfigPath));
  t.after(() => transport.close());
  const before = plain.connectionsAccepted();
  for (let i = 0; i < 3; i++) assert.equal((await get(transport)).metadata.name, "default");
  assert.equal(plain.connectionsAccepted() - before, 1, "plain HTTP");
});

test("close() ends the transport's connections: the server sees its HTTP/2 session and its HTTP/1.1 socket closed", async (t) => {
  const cert = await selfSignedCert();
  const h2Sessions: { closed: boolean }[] = [];
  const h2 = createSecureServer({ key: cert.key, cert: cert.cert }, (_req, res) => res.end(JSON.stringify({ metadata: { name: "default" } })));
  h2.on("session", (s) => {
    const seen = { closed: false };
    h2Sessions.push(seen);
    s.once("close", () => (seen.closed = true));
  });
  await new Promise<void>((r) => h2.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => h2.close(() => r())));
  const overH2 = new KubeTransport({
    server: new URL(`https://127.0.0.1:${(h2.address() as AddressInfo).port}`),
    ca: Buffer.from(cert.cert),
    token: () => "t",
  });
  await get(overH2);
  assert.equal(h2Sessions.length, 1);
  overH2.close();
  await waitFor("the server's HTTP/2 session closed", () => h2Sessions[0]!.closed, { timeoutMs: 3_000 });

  const sockets: { closed: boolean }[] = [];
  const http1 = createHttpServer(answerHttp1);
  // Longer than the wait below: the server must not be the one closing the idle socket.
  http1.keepAliveTimeout = 60_000;
  http1.on("connection", (s: Socket) => {
    const seen = { closed: false };
    sockets.push(seen);
    s.once("close", () => (seen.closed = true));
  });
  await new Promise<void>((r) => http1.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (http1.closeAllConnections(), http1.close(() => r()))));
  const overHttp1 = new KubeTransport({ server: new URL(`http://127.0.0.1:${(http1.address() as AddressInfo).port}`), token: () => "t" });
  await get(overHttp1);
  assert.equal(sockets.length, 1);
  assert.equal(sockets[0]!.closed, false, "kept alive until closed");
  overHttp1.close();
  await waitFor("the server's HTTP/1.1 socket closed", () => sockets[0]!.closed, { timeoutMs: 3_000 });
});

test("a watch the server ends resolves (the caller then lists again), over HTTP/2 and HTTP/1.1", async (t) => {
  for (const tls of [true, false]) {
    const api = await startKubeApi({ tls });
    t.after(() => api.stop());
    const transport = new KubeTransport(await kubeconfigEndpoint(api.kubeconfigPath));
    t.after(() => transport.close());
    const seen: string[] = [];
    const watching = transport.watch("/api/v1/namespaces?watch=true", AbortSignal.timeout(20_000), (e) => seen.push(e.object["metadata"]?.name));
    await waitFor("the watch's first event", () => seen.includes("default"));
    api.faults.dropWatches();
    await watching;
  }
});

test("deleting a CSIAddonsNode waits for the API's answer: a uid precondition that fails rejects (409), a delete that resolves is done", async (t) => {
  const api = await startKubeApi({ crdFiles: [upstreamCrdFile], seed: [namespace()] });
  t.after(() => api.stop());
  const transport = new KubeTransport(await kubeconfigEndpoint(api.kubeconfigPath));
  t.after(() => transport.close());
  const kube = createKubeApi(transport);
  const made = (await api.create({
    apiVersion: "csiaddons.openshift.io/v1alpha1",
    kind: "CSIAddonsNode",
    metadata: { name: "n1", namespace: NS },
    spec: { driver: { name: "d", endpoint: "pod://p.csi:9070", nodeID: "node-1" } },
  })) as { metadata: { uid: string } };
  const signal = () => AbortSignal.timeout(5_000);
  await assert.rejects(kube.deleteCSIAddonsNode(NS, "n1", "another-uid", signal()), (e: KubeError) => e instanceof KubeError && e.status === 409);
  await kube.deleteCSIAddonsNode(NS, "n1", made.metadata.uid, signal());
  assert.equal(api.get("csiaddons.openshift.io/v1alpha1", "CSIAddonsNode", NS, "n1"), undefined);
});

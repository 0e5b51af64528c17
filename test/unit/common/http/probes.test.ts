// common/http/probes: the kubelet's probes and Prometheus' scrape on one small HTTP server, the
// same in both programs: /healthz alive, /readyz the program's readiness with its reason,
// /metrics the registry; nothing else.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, Registry } from "prom-client";
import { startHttpServer } from "../../../../common/http/probes.js";

async function serve(t: TestContext, readiness: { ready: boolean; reason(): string }, registry = new Registry()) {
  const server = await startHttpServer({ host: "127.0.0.1", port: 0 }, readiness, registry);
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as AddressInfo).port;
  return (method: string, path: string) =>
    new Promise<{ status: number; type: string | undefined; body: string }>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, method, path }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode!, type: res.headers["content-type"], body }));
      });
      req.on("error", reject);
      req.end();
    });
}

test("/healthz answers while the process runs; /readyz follows readiness with its reason; both ignore a query string", async (t) => {
  const readiness = { ready: false, reason: () => (readiness.ready ? "ready" : "driver not connected") };
  const get = await serve(t, readiness);
  assert.deepEqual(await get("GET", "/healthz"), { status: 200, type: "text/plain", body: "ok\n" });
  assert.deepEqual(await get("GET", "/readyz"), { status: 503, type: "text/plain", body: "driver not connected\n" });
  readiness.ready = true;
  assert.deepEqual(await get("GET", "/readyz?verbose"), { status: 200, type: "text/plain", body: "ready\n" });
  assert.equal((await get("HEAD", "/healthz")).status, 200);
});

test("/metrics is the registry in Prometheus' text format; a registry that fails is a 500", async (t) => {
  const registry = new Registry();
  new Counter({ name: "probe_test_total", help: "a counter", registers: [registry] }).inc(3);
  const get = await serve(t, { ready: true, reason: () => "ready" }, registry);
  const m = await get("GET", "/metrics");
  assert.equal(m.status, 200);
  assert.equal(m.type, registry.contentType);
  assert.match(m.body, /^probe_test_total 3$/m);
  const broken = { metrics: () => Promise.reject(new Error("collect failed")), contentType: "text/plain" } as unknown as Registry;
  const getBroken = await serve(t, { ready: true, reason: () => "ready" }, broken);
  assert.equal((await getBroken("GET", "/metrics")).status, 500);
});

test("anything else: 404 for other paths, 405 for other methods", async (t) => {
  const get = await serve(t, { ready: true, reason: () => "ready" });
  assert.equal((await get("GET", "/")).status, 404);
  assert.equal((await get("GET", "/debug/pprof")).status, 404);
  assert.equal((await get("POST", "/readyz")).status, 405);
  assert.equal((await get("DELETE", "/metrics")).status, 405);
});

test("a port already taken is an error at start, not later", async (t) => {
  const taken: Server = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => taken.close(() => resolve())));
  const port = (taken.address() as AddressInfo).port;
  await assert.rejects(startHttpServer({ host: "127.0.0.1", port }, { ready: true, reason: () => "" }, new Registry()), /EADDRINUSE/);
});

// The controller's writes (Events, annotation patches, Lease renewals) share pooled connections to
// the API server: client-node alone would open a new TLS connection for every request, which was a
// third of the controller's CPU in a 500-volume restart heal. Events go over one HTTP/2 connection,
// or over HTTP/1.1 when the server does not speak h2.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import https from "node:https";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { createKubeWrites, loadKubeConfig } from "../../../controller/kube/client.js";
import { KubeRequestError, type EventRecord } from "../../../controller/kube/api.js";
import { KeepAliveAgents } from "../../../controller/kube/keep-alive.js";
import type { H2Connection } from "../../../common/kube/h2-connection.js";
import { startKubeApi, type KubeApi } from "../../kube/server.js";
import { selfSignedCert } from "../../kube/tls.js";
import { editKubeconfig } from "../../kube/kubeconfig.js";
import { startTs, tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";

let api: KubeApi;

before(async () => {
  api = await startKubeApi();
});

after(async () => {
  await api?.stop();
});

const pvEvent = (i: number): EventRecord => ({
  involved: { kind: "PersistentVolume", apiVersion: "v1", namespace: undefined, name: `pv-${i}`, uid: `uid-${i}` },
  type: "Normal",
  reason: "VolumeHealed",
  message: "volume healed",
});

test("30 Events written one after another reuse one connection to the API server", async () => {
  const kube = createKubeWrites(loadKubeConfig(api.kubeconfigPath));
  const before = api.connectionsAccepted();
  for (let i = 0; i < 30; i++) await kube.createEvent("default", pvEvent(i), AbortSignal.timeout(5_000));
  assert.equal(api.list("v1", "Event", "default").length >= 30, true);
  const opened = api.connectionsAccepted() - before;
  assert.ok(opened <= 1, `30 sequential requests opened ${opened} connections`);
});

test("32 Events written at once share one HTTP/2 connection", async () => {
  const kube = createKubeWrites(loadKubeConfig(api.kubeconfigPath));
  const before = api.connectionsAccepted();
  const names = await Promise.all(Array.from({ length: 32 }, (_, i) => kube.createEvent("default", pvEvent(200 + i), AbortSignal.timeout(5_000))));
  assert.equal(new Set(names).size, 32);
  // Over HTTP/1.1 each request in flight needs a connection of its own.
  const opened = api.connectionsAccepted() - before;
  assert.ok(opened <= 1, `32 requests at once opened ${opened} connections`);
});

// With one request the connection's only stream closes and nothing overlaps it; with several, a
// request may start before the previous stream's close, so both counts are run.
for (const events of [1, 3]) {
  test(`an idle HTTP/2 connection does not keep a program that has written its Events (${events}) from exiting`, async (t) => {
    const proc = startTs("test/support/write-events.ts", [api.kubeconfigPath, String(events)]);
    t.after(() => proc.stop(1_000));
    let code: number | string | undefined;
    void proc.exited.then((c) => (code = c));
    await waitFor("the program to write its Events and exit by itself", () => code !== undefined);
    assert.equal(code, 0, proc.stderr());
    assert.match(proc.stdout(), /written/);
  });
}

test("an API server that does not speak HTTP/2: Events go over HTTP/1.1, with the user's token", async (t) => {
  const cert = await selfSignedCert();
  const seen: { via: string; auth: string | undefined }[] = [];
  const server = https.createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
    seen.push({ via: req.httpVersion, auth: req.headers.authorization });
    req.resume();
    req.on("end", () => {
      res.writeHead(201, { "content-type": "application/json" });
      res.end(JSON.stringify({ metadata: { name: `event-${seen.length}` } }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  const kubeconfig = join(tempDir("h1-kubeconfig-"), "kubeconfig");
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "h1", cluster: { server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, "certificate-authority-data": cert.caData } }],
      users: [{ name: "u", user: { token: "t-h1" } }],
      contexts: [{ name: "c", context: { cluster: "h1", user: "u" } }],
      "current-context": "c",
    }),
  );
  const kube = createKubeWrites(loadKubeConfig(kubeconfig));
  assert.equal(await kube.createEvent("default", pvEvent(300), AbortSignal.timeout(5_000)), "event-1");
  assert.equal(await kube.createEvent("default", pvEvent(301), AbortSignal.timeout(5_000)), "event-2");
  assert.deepEqual(seen, [
    { via: "1.1", auth: "Bearer t-h1" },
    { via: "1.1", auth: "Bearer t-h1" },
  ]);
});

test("one keep-alive agent per set of TLS options; a changed CA gets a new one; proxy agents pass through", () => {
  const agents = new KeepAliveAgents();
  const first = agents.share(new https.Agent({ ca: "CA-1", rejectUnauthorized: true }))!;
  assert.equal(agents.share(new https.Agent({ ca: "CA-1", rejectUnauthorized: true })), first);
  assert.equal((first as http.Agent & { keepAlive: boolean }).keepAlive, true);
  const rotated = agents.share(new https.Agent({ ca: "CA-2", rejectUnauthorized: true }))!;
  assert.notEqual(rotated, first);
  assert.equal((first as http.Agent & { keepAlive: boolean }).keepAlive, false, "the replaced agent stops pooling");
  class ProxyAgent extends https.Agent {}
  const proxy = new ProxyAgent();
  assert.equal(agents.share(proxy), proxy);
  assert.equal(agents.share(undefined), undefined);
  agents.close();
});

test("one HTTP/2 connection per set of TLS options; none for plain HTTP, a proxy or no agent", () => {
  const agents = new KeepAliveAgents();
  const server = new URL("https://127.0.0.1:6443");
  const first = agents.route(server, new https.Agent({ ca: "CA-1", rejectUnauthorized: true })).h2;
  assert.ok(first);
  assert.equal(agents.route(server, new https.Agent({ ca: "CA-1", rejectUnauthorized: true })).h2, first);
  const rotated = agents.route(server, new https.Agent({ ca: "CA-2", rejectUnauthorized: true })).h2;
  assert.ok(rotated);
  assert.notEqual(rotated, first, "a changed CA gets a new connection");
  class ProxyAgent extends https.Agent {}
  assert.equal(agents.route(server, new ProxyAgent()).h2, undefined);
  assert.equal(agents.route(server, undefined).h2, undefined);
  assert.equal(agents.route(new URL("http://127.0.0.1:8080"), new http.Agent()).h2, undefined);
  agents.close();
});

test("Events go out as plain JSON requests: a refusal is a KubeRequestError naming the request and the API server's status; a bump updates the count", async () => {
  const kube = createKubeWrites(loadKubeConfig(api.kubeconfigPath));
  api.faults.failNext(1, 503, { verb: "create", resource: "events" });
  await assert.rejects(kube.createEvent("default", pvEvent(100), AbortSignal.timeout(5_000)), (err: unknown) => {
    assert.ok(err instanceof KubeRequestError);
    assert.equal(err.status, 503);
    assert.equal(
      err.message,
      "create Event in default: HTTP 503: the server is currently unable to handle the request (injected fault)",
      "the status, and what the API server said",
    );
    return true;
  });
  const name = await kube.createEvent("default", pvEvent(101), AbortSignal.timeout(5_000));
  const stored = () =>
    api.get("v1", "Event", "default", name) as {
      count: number;
      reason: string;
      involvedObject: { name: string; uid: string };
      firstTimestamp: string;
      lastTimestamp: string;
    };
  assert.equal(stored().reason, "VolumeHealed");
  assert.deepEqual([stored().involvedObject.name, stored().involvedObject.uid, stored().count], ["pv-101", "uid-101", 1]);
  assert.ok(!Number.isNaN(Date.parse(stored().firstTimestamp)), "an RFC 3339 time");
  await kube.bumpEvent("default", name, 2, AbortSignal.timeout(5_000));
  assert.equal(stored().count, 2);
  await assert.rejects(
    kube.bumpEvent("default", "no-such-event", 2, AbortSignal.timeout(5_000)),
    (err: unknown) => err instanceof KubeRequestError && err.status === 404,
  );
});

test("Event writes check the API server's certificate against the kubeconfig's CA: another CA's is refused, insecure-skip-tls-verify reaches it", async (t) => {
  const dir = tempDir("kube-ca-");
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const edited = (name: string, change: (cluster: Record<string, unknown>) => void) =>
    loadKubeConfig(editKubeconfig(api.kubeconfigPath, join(dir, name), (c) => change(c.clusters[0]!.cluster)));
  const stranger = await selfSignedCert();
  const misled = createKubeWrites(edited("stranger-ca.json", (c) => (c["certificate-authority-data"] = stranger.caData)));
  await assert.rejects(misled.createEvent("default", pvEvent(300), AbortSignal.timeout(5_000)), (err: unknown) => {
    assert.ok(err instanceof KubeRequestError, String(err));
    assert.equal(err.status, 0, "never reached");
    assert.match(err.message, /^create Event in default: .*(CERT|certificate)/i, "named by the TLS check that refused it");
    return true;
  });
  const skipping = createKubeWrites(
    edited("insecure.json", (c) => {
      delete c["certificate-authority-data"];
      c["insecure-skip-tls-verify"] = true;
    }),
  );
  const name = await skipping.createEvent("default", pvEvent(301), AbortSignal.timeout(5_000));
  assert.ok(api.get("v1", "Event", "default", name), "written without checking the certificate, as the kubeconfig asks");
});

test("a changed CA retires the HTTP/2 connection made with the old one: it closes once its requests are done", async (t) => {
  const own = await startKubeApi();
  const agents = new KeepAliveAgents();
  t.after(async () => (agents.close(), await own.stop()));
  const config = JSON.parse(readFileSync(own.kubeconfigPath, "utf8")) as { clusters: { cluster: Record<string, string> }[] };
  const ca = Buffer.from(config.clusters[0]!.cluster["certificate-authority-data"]!, "base64");
  const version = async (h2: H2Connection) => {
    const { status, body } = await h2.request("GET", "/version", { authorization: `Bearer ${own.adminToken}` }, undefined, AbortSignal.timeout(5_000));
    for await (const _ of body);
    assert.equal(status, 200);
  };
  const url = new URL(own.url);
  await version(agents.route(url, new https.Agent({ ca, rejectUnauthorized: true })).h2!);
  assert.equal(own.connectionsOpen(), 1);
  // As client-node hands over after the CA file was rotated: other TLS options, so another pool.
  await version(agents.route(url, new https.Agent({ rejectUnauthorized: false })).h2!);
  await waitFor("the connection made with the old CA closed", () => own.connectionsOpen() === 1);
  assert.equal(own.connectionsAccepted(), 2);
});

test("a refusal says what the API server said of it: a 403 names the verb and the resource the identity lacks, through either client", async (t) => {
  const own = await startKubeApi({ requireRbac: true });
  t.after(() => own.stop());
  own.auth.addToken("nobody-token", { username: "system:serviceaccount:csi-addons-system:nobody" });
  const kube = createKubeWrites(loadKubeConfig(own.writeKubeconfig("nobody-token", "nobody")));
  const who = 'User "system:serviceaccount:csi-addons-system:nobody"';
  const refused = (message: string) => (err: unknown) => {
    assert.ok(err instanceof KubeRequestError, String(err));
    assert.equal(err.status, 403);
    assert.equal(err.message, message);
    return true;
  };
  // An Event goes out as a plain JSON request; a Lease through client-node's typed API.
  await assert.rejects(
    kube.createEvent("default", pvEvent(400), AbortSignal.timeout(5_000)),
    refused(`create Event in default: HTTP 403: events is forbidden: ${who} cannot create resource "events" in API group "" in the namespace "default"`),
  );
  await assert.rejects(
    kube.readLease("default", "healer", AbortSignal.timeout(5_000)),
    refused(
      `get Lease default/healer: HTTP 403: leases.coordination.k8s.io "healer" is forbidden: ${who} cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "default"`,
    ),
  );
});

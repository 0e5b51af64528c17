// The controller's writes (Events, annotation patches, Lease renewals) share pooled connections to
// the API server: client-node alone would open a new TLS connection for every request, which was a
// third of the controller's CPU in a 500-volume restart heal.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import https from "node:https";
import { createKubeWrites, loadKubeConfig } from "../../controller/kube/client.js";
import { KubeRequestError, type EventRecord } from "../../controller/kube/api.js";
import { KeepAliveAgents } from "../../controller/kube/keep-alive.js";
import { startKubeApi, type KubeApi } from "../kube/server.js";

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

test("Events go out as plain JSON requests: a refusal is a KubeRequestError naming the request and the API server's status; a bump updates the count", async () => {
  const kube = createKubeWrites(loadKubeConfig(api.kubeconfigPath));
  api.faults.failNext(1, 503, { verb: "create", resource: "events" });
  await assert.rejects(kube.createEvent("default", pvEvent(100), AbortSignal.timeout(5_000)), (err: unknown) => {
    assert.ok(err instanceof KubeRequestError);
    assert.equal(err.status, 503);
    assert.equal(err.message, "create Event in default: HTTP 503");
    return true;
  });
  const name = await kube.createEvent("default", pvEvent(101), AbortSignal.timeout(5_000));
  const stored = () => api.get("v1", "Event", "default", name) as { count: number; reason: string; involvedObject: { name: string; uid: string }; firstTimestamp: string; lastTimestamp: string };
  assert.equal(stored().reason, "VolumeHealed");
  assert.deepEqual([stored().involvedObject.name, stored().involvedObject.uid, stored().count], ["pv-101", "uid-101", 1]);
  assert.ok(!Number.isNaN(Date.parse(stored().firstTimestamp)), "an RFC 3339 time");
  await kube.bumpEvent("default", name, 2, AbortSignal.timeout(5_000));
  assert.equal(stored().count, 2);
  await assert.rejects(kube.bumpEvent("default", "no-such-event", 2, AbortSignal.timeout(5_000)), (err: unknown) => err instanceof KubeRequestError && err.status === 404);
});

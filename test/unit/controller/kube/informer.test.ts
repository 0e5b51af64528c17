// kube/informer: how a watch ends when the API server does not end it cleanly. A re-watch whose
// credentials cannot be read for a moment (a projected token file being rotated) is retried, not
// an unhandled rejection that ends the controller; and a watch is never trusted forever: the
// server is asked to end it within 5-10 minutes (as client-go's reflector does), and a stream
// silent for too long (a connection dead without FIN or RST, behind something that still answers
// TCP keepalives) is given up, so a restart marker written meanwhile still reaches the cache.
// unit tier: own process (its tests wait out watch timeouts, about 13 s in all).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { join } from "node:path";
import { CoreV1Api, Watch, type KubeConfig, type V1PersistentVolume } from "@kubernetes/client-node";
import { loadKubeConfig, requestOptions } from "../../../../controller/kube/client.js";
import { pvInformer } from "../../../../controller/kube/cluster.js";
import { Informer, type WatchBounds } from "../../../../controller/kube/informer.js";
import type { Logger } from "../../../../common/log/logger.js";
import { startKubeApi, type KubeApi } from "../../../kube/server.js";
import { editKubeconfig, type KubeconfigJson } from "../../../kube/kubeconfig.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { pv } from "../../../support/fixtures.js";
import { tempDir } from "../../../support/proc.js";
import { waitFor } from "../../../support/wait.js";

const PVS = "persistentvolumes";
let api: KubeApi;
let dir: string;
before(async () => {
  api = await startKubeApi({ seed: [pv("pv-0")] });
  dir = tempDir("informer-watch-");
});
after(async () => {
  await api?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The admin kubeconfig, changed by `edit` (its cluster and user entries). */
function kubeconfig(name: string, edit: (c: KubeconfigJson) => void): string {
  return editKubeconfig(api.kubeconfigPath, join(dir, name), edit);
}

/** A PV informer as cluster.ts builds one, with the given watch bounds. */
function boundedPvInformer(kc: KubeConfig, logger: Logger, bounds: WatchBounds): Informer<V1PersistentVolume> {
  const core = kc.makeApiClient(CoreV1Api);
  return new Informer(kc, "/api/v1/persistentvolumes", (p, s) => core.listPersistentVolume(p, requestOptions(s)), logger, undefined, bounds);
}

const resumes = (lines: Record<string, unknown>[]) => lines.filter((l) => l["message"] === "watch ended with an error; resuming");

test("a re-watch whose token file is briefly missing is logged and retried with backoff, never an unhandled rejection", { timeout: 60_000 }, async (t) => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => void unhandled.push(reason);
  process.on("unhandledRejection", onUnhandled);
  t.after(() => process.off("unhandledRejection", onUnhandled));
  // As in a pod (KubeConfig.loadFromCluster): client-node's FileAuth reads the token file.
  const tokenFile = join(dir, "token");
  writeFileSync(tokenFile, api.adminToken);
  const path = kubeconfig("token-file.json", (c) => (c.users[0]!.user = { "auth-provider": { name: "tokenFile", config: { tokenFile } } }));
  // FileAuth reads the file again only once its copy is 60 s old: Date is mocked to get there at
  // once, and moved on with each poll so that waitFor's deadlines still pass.
  t.mock.timers.enable({ apis: ["Date"], now: Date.now() });
  const poll = <T>(what: string, probe: () => T | undefined | false) => waitFor(what, () => (t.mock.timers.tick(25), probe()));

  const { lines, logger } = captureLogger("debug");
  const informer = pvInformer(loadKubeConfig(path), logger);
  t.after(() => informer.stop());
  const watches = api.counters.get("watch", PVS);
  await informer.start();
  await poll("the watch at the API", () => api.counters.get("watch", PVS) > watches);
  const lists = api.counters.get("list", PVS);

  rmSync(tokenFile);
  t.mock.timers.tick(61_000);
  const failed = () => resumes(lines).filter((l) => String(l["error"]).includes("ENOENT"));
  // Dropped until it is: the watch counted at the API may not be serving yet.
  await poll("two failed re-watches, or an unhandled rejection", () => (api.faults.dropWatches(), failed().length >= 2 || unhandled.length > 0));
  assert.deepEqual(unhandled, [], "the failed re-watch rejected with nobody to handle it: it would end the controller");
  assert.deepEqual(
    failed()
      .slice(0, 2)
      .map((l) => l["retryInMs"]),
    [200, 400],
    "retried with backoff",
  );

  writeFileSync(tokenFile, api.adminToken);
  await api.create(pv("pv-after-rotation"));
  await poll("the informer watching again", () => informer.get("pv-after-rotation") !== undefined);
  assert.equal(api.counters.get("list", PVS), lists, "resumed from its resourceVersion");
  assert.deepEqual(unhandled, []);
});

test("each watch asks the API server to end it after 5 to 10 minutes, and for bookmarks", async (t) => {
  const watch = t.mock.method(Watch.prototype, "watch");
  const informer = pvInformer(loadKubeConfig(api.kubeconfigPath), captureLogger().logger);
  t.after(() => informer.stop());
  await informer.start();
  await waitFor("a watch after the first was dropped", () => (api.faults.dropWatches(), watch.mock.callCount() >= 2));
  for (const call of watch.mock.calls) {
    const q = call.arguments[1] as Record<string, unknown>;
    const s = q["timeoutSeconds"];
    assert.ok(typeof s === "number" && Number.isInteger(s) && s >= 300 && s < 600, `timeoutSeconds ${String(s)}`);
    assert.equal(q["allowWatchBookmarks"], true);
    assert.match(String(q["resourceVersion"]), /^\d+$/);
  }
});

test("a watch the server ends at its timeoutSeconds is resumed from the last resourceVersion", { timeout: 30_000 }, async (t) => {
  api.counters.reset();
  const { lines, logger } = captureLogger("debug");
  const informer = boundedPvInformer(loadKubeConfig(api.kubeconfigPath), logger, { timeoutSeconds: () => 1 });
  t.after(() => informer.stop());
  await informer.start();
  await waitFor("two watches ended by the server", () => api.counters.get("watch", PVS) >= 3, { timeoutMs: 10_000 });
  await api.create(pv("pv-after-timeout"));
  await waitFor("the PV created since", () => informer.get("pv-after-timeout") !== undefined);
  assert.equal(api.counters.get("list", PVS), 1, "no relist");
  assert.deepEqual(resumes(lines), [], "a watch ending on time is no error");
});

/**
 * A TCP proxy to the API server whose connections can be stalled: open, but carrying nothing
 * either way, as a peer gone without FIN or RST behind a load balancer looks to the client.
 */
async function stallingProxy(target: URL) {
  const conns = new Set<[net.Socket, net.Socket]>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    conns.add(pair);
    const gone = () => {
      client.destroy();
      upstream.destroy();
      conns.delete(pair);
    };
    for (const s of pair) s.on("error", gone).on("close", gone);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `${target.protocol}//127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    stall() {
      for (const [client, upstream] of conns) {
        client.unpipe(upstream).pause();
        upstream.unpipe(client).pause();
      }
    },
    async close() {
      for (const pair of conns) for (const s of pair) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

test("a watch silent for longer than its bound is given up, and what changed meanwhile reaches the cache", { timeout: 30_000 }, async (t) => {
  const proxy = await stallingProxy(new URL(api.url));
  t.after(() => proxy.close());
  const path = kubeconfig("proxied.json", (c) => (c.clusters[0]!.cluster["server"] = proxy.url));
  api.counters.reset();
  const { lines, logger } = captureLogger("debug");
  const informer = boundedPvInformer(loadKubeConfig(path), logger, { idleMs: 500 });
  t.after(() => informer.stop());
  await informer.start();
  await api.create(pv("pv-before-stall"));
  await waitFor("the watch delivering", () => informer.get("pv-before-stall") !== undefined);

  proxy.stall();
  await api.create(pv("pv-restart-marker"));
  await waitFor("the change the stalled watch never delivered", () => informer.get("pv-restart-marker") !== undefined, { timeoutMs: 10_000 });
  assert.equal(api.counters.get("list", PVS), 1, "resumed from its resourceVersion, no relist");
  assert.ok(lines.some((l) => l["message"] === "watch silent too long; watching again" && l["idleMs"] === 500));
  assert.deepEqual(resumes(lines), [], "resumed at once, as a watch the server closed: no backoff");
});

test("a watch whose response does not come within the bound is retried with backoff", { timeout: 30_000 }, async (t) => {
  const { lines, logger } = captureLogger("debug");
  // timeoutSeconds 1: the in-memory API serves a held watch after its client gave up, and would keep it (and this process) until then.
  const informer = boundedPvInformer(loadKubeConfig(api.kubeconfigPath), logger, { idleMs: 300, timeoutSeconds: () => 1 });
  t.after(() => informer.stop());
  // The list answers; every watch is held 5 s before the API server looks at it.
  api.faults.latency(5_000, { verb: "watch", resource: PVS });
  t.after(() => api.faults.clear());
  await informer.start();
  await waitFor("a watch given up", () => resumes(lines).some((l) => String(l["error"]).includes("network timeout")), { timeoutMs: 3_000 });
  api.faults.clear();
  await api.create(pv("pv-after-hang"));
  await waitFor("the informer watching again", () => informer.get("pv-after-hang") !== undefined, { timeoutMs: 3_000 });
});

const silent = (lines: Record<string, unknown>[]) => lines.filter((l) => l["message"] === "watch silent too long; watching again");

test("a watch whose events come more often than its idle bound is never given up, however long it lasts", { timeout: 30_000 }, async (t) => {
  const { lines, logger } = captureLogger("debug");
  const informer = boundedPvInformer(loadKubeConfig(api.kubeconfigPath), logger, { idleMs: 1_000 });
  t.after(() => informer.stop());
  await informer.start();
  await waitFor("the watch at the API", () => api.counters.get("watch", PVS) > 0);
  const watches = api.counters.get("watch", PVS);
  // One event every 200 ms for three idle bounds: each event restarts the bound.
  for (let i = 0; i < 15; i++) {
    const name = `pv-steady-${i}`;
    await api.create(pv(name));
    await waitFor(`the informer seeing ${name}`, () => informer.get(name) !== undefined);
    await delay(200); // the pace of the events under test, not a wait for something to happen
  }
  assert.deepEqual(silent(lines), [], "a watch that delivers is not silent");
  assert.equal(api.counters.get("watch", PVS), watches, "the one watch served throughout");
});

test("a watch refused with an error, or ended by the server, leaves no idle timer behind to fire later", { timeout: 30_000 }, async (t) => {
  const { lines, logger } = captureLogger("debug");
  // Watches end after 1 s, before their 1.5 s idle bound: only a timer left behind by an ended watch could fire.
  const informer = boundedPvInformer(loadKubeConfig(api.kubeconfigPath), logger, { idleMs: 1_500, timeoutSeconds: () => 1 });
  t.after(() => informer.stop());
  await informer.start();
  await waitFor("the watch at the API", () => api.counters.get("watch", PVS) > 0);
  const watches = api.counters.get("watch", PVS);
  api.faults.failNext(2, 500, { verb: "watch", resource: PVS });
  t.after(() => api.faults.clear());
  api.faults.dropWatches();
  await waitFor("two refused watches, then three the server ended, and a fourth", () => api.counters.get("watch", PVS) >= watches + 6, { timeoutMs: 15_000 });
  assert.deepEqual(
    resumes(lines).map((l) => [l["error"], l["retryInMs"]]),
    [
      ["HTTP 500", 200],
      ["HTTP 500", 400],
    ],
    "each refusal resumed with backoff, named by its status",
  );
  assert.deepEqual(silent(lines), [], "no watch was silent: every one ended before its idle bound");
});

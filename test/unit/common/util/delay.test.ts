// common/util (the retry waits and the backoff every reconnecting loop uses, the version both
// programs print) and common/net (where the servers listen, and how grpc-js is told so).
import { test } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { readFileSync } from "node:fs";
import { Backoff, delay } from "../../../../common/util/delay.js";
import { packageVersion } from "../../../../common/util/version.js";
import { hostPort, listenHost } from "../../../../common/net/listen-host.js";
import { activeHandles } from "../../../support/handles.js";

test("Backoff: doubles from its first wait up to the cap and stays there; reset() starts over", () => {
  const b = new Backoff(200, 1_000);
  assert.deepEqual([b.take(), b.take(), b.take(), b.take(), b.take()], [200, 400, 800, 1_000, 1_000]);
  b.reset();
  assert.deepEqual([b.take(), b.take()], [200, 400]);
});

test("delay: resolves after its time, and no earlier", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  let done = false;
  const p = delay(1_000).then(() => (done = true));
  t.mock.timers.tick(999);
  await new Promise(setImmediate);
  assert.equal(done, false);
  t.mock.timers.tick(1);
  await p;
  assert.equal(done, true);
});

test("delay: an abort ends the wait at once, and lets go of the signal", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const c = new AbortController();
  const p = delay(60_000, c.signal);
  assert.equal(getEventListeners(c.signal, "abort").length, 1);
  c.abort();
  await p; // with mocked timers the 60 s never pass: only the abort can end it
  assert.equal(getEventListeners(c.signal, "abort").length, 0);
});

test("delay: an aborted wait leaves no timer behind, which would hold a stopping program for the rest of the wait", async () => {
  const timers = () => activeHandles("Timeout");
  const before = timers();
  const c = new AbortController();
  const p = delay(60_000, c.signal);
  assert.equal(timers(), before + 1);
  c.abort();
  await p;
  assert.equal(timers(), before);
});

test("delay: a wait that ends by its time lets go of the signal too (a long-lived signal would collect one listener per retry)", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const c = new AbortController();
  const p = delay(100, c.signal);
  t.mock.timers.tick(100);
  await p;
  assert.equal(getEventListeners(c.signal, "abort").length, 0);
});

test("delay: an already aborted signal resolves at once, without a timer", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const c = new AbortController();
  c.abort();
  await delay(60_000, c.signal); // with mocked timers, a timer would never fire: this would hang
});

test("packageVersion: the version in package.json, found from the module's folder upwards", () => {
  const pkg = JSON.parse(readFileSync(new URL("../../../../package.json", import.meta.url), "utf8")) as { version: string };
  assert.equal(packageVersion(), pkg.version);
});

test("hostPort: an IPv6 literal in brackets, a name or IPv4 address as it is", () => {
  assert.equal(hostPort("::", 9070), "[::]:9070");
  assert.equal(hostPort("fd00::7", 0), "[fd00::7]:0");
  assert.equal(hostPort("10.0.0.7", 9070), "10.0.0.7:9070");
  assert.equal(hostPort("localhost", 9070), "localhost:9070");
});

test("listenHost: :: stays on a node with any IPv6 address, even one interface among IPv4 ones", () => {
  const ifs = {
    eth0: [{ address: "10.0.0.7", family: "IPv4" }],
    lo: [
      { address: "127.0.0.1", family: "IPv4" },
      { address: "::1", family: "IPv6" },
    ],
  } as unknown as Parameters<typeof listenHost>[1];
  assert.equal(listenHost("::", ifs), "::");
  assert.equal(listenHost("::", { eth0: undefined } as unknown as Parameters<typeof listenHost>[1]), "0.0.0.0");
});

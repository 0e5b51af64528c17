// A driver that answers but fails the handshake (here: an empty name from GetIdentity, which would
// label every metric with nothing) is not taken as ready: the sidecar says why at warn, tries
// again a second later, and is ready once the driver answers properly. A Probe that fails (not a
// timeout) fails the handshake the same way; a Probe that says not ready is asked again, said at
// the first attempt and every tenth. A driver not there yet is waited for quietly: "still
// waiting" is said every 10 s, not at every attempt.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Metadata, status as grpcStatus, type Server, type ServiceError } from "@grpc/grpc-js";
import { IdentityService, type IdentityServer } from "../../proto/gen/identity/identity.js";
import { DriverConnection, type DriverConnectionOptions, type ReadyEvent } from "../../sidecar/driver/connection.js";
import { captureLogger } from "../support/capture-logger.js";
import { serveFakeDriver } from "../support/cluster.js";
import { tempDir } from "../support/proc.js";
import { waitFor } from "../support/wait.js";

const opened: { close(): void }[] = [];
after(() => opened.forEach((o) => o.close()));

const identity = (name: string): IdentityServer => ({
  getIdentity: (_c, cb) => cb(null, { name, vendorVersion: "1.0.0", manifest: {} }),
  getCapabilities: (_c, cb) => cb(null, { capabilities: [] }),
  probe: (_c, cb) => cb(null, { ready: true }),
});

async function serve(socket: string, impl: IdentityServer): Promise<Server> {
  const server = await serveFakeDriver(socket, IdentityService, impl);
  opened.push({ close: () => server.forceShutdown() });
  return server;
}

/** A started connection to `socket`, logging into `lines`, its ready events in `ready`. */
function connect(socket: string, more: Partial<DriverConnectionOptions> = {}) {
  const { lines, logger } = captureLogger();
  const conn = new DriverConnection({ socketPath: socket, callTimeoutMs: 5_000, logger, ...more });
  opened.push(conn);
  const ready: ReadyEvent[] = [];
  conn.on("ready", (e) => ready.push(e));
  conn.start();
  return { conn, lines, ready };
}

/** A fake driver whose Probe answers with `probe(attempt)`; resolves once the connection is ready. */
async function probed(probe: (attempt: number) => { ready: boolean } | ServiceError): Promise<{ lines: Record<string, unknown>[]; probes: number }> {
  const socket = join(tempDir(), "addons.sock");
  let probes = 0;
  await serve(socket, {
    ...identity("probed.csi.example.com"),
    probe: (_c, cb) => {
      const answer = probe(++probes);
      if ("code" in answer) cb(answer, null);
      else cb(null, answer);
    },
  });
  const { lines, ready } = connect(socket);
  await waitFor("ready", () => ready.length === 1);
  return { lines, probes };
}

test("a failed handshake is logged with its reason and retried until the driver answers properly", async () => {
  const socket = join(tempDir(), "addons.sock");
  const identityAt: number[] = [];
  await serve(socket, {
    ...identity("handshake.csi.example.com"),
    getIdentity: (_c, cb) => cb(null, { name: identityAt.push(Date.now()) === 1 ? "" : "handshake.csi.example.com", vendorVersion: "1.0.0", manifest: {} }),
  });
  const { lines, ready } = connect(socket);
  await waitFor("ready after the retry", () => ready.length === 1);
  assert.equal(identityAt.length, 2);
  // Not hammered: the retry comes a second later (the sidecar's RETRY_MS), not at once.
  assert.ok(identityAt[1]! - identityAt[0]! >= 950, `retried after ${identityAt[1]! - identityAt[0]!} ms`);
  assert.equal(ready[0]!.info.name, "handshake.csi.example.com");
  const failed = lines.filter((l) => l["message"] === "driver handshake failed; retrying");
  assert.equal(failed.length, 1, JSON.stringify(lines));
  assert.equal(failed[0]!["level"], "warn");
  assert.equal(failed[0]!["socket"], socket);
  assert.match(String(failed[0]!["error"]), /empty name from GetIdentity/);
});

test("a driver that is not there yet is waited for without a log line per attempt", async () => {
  const socket = join(tempDir(), "addons.sock");
  const { conn, lines, ready } = connect(socket, { reconnectBackoffMs: { initial: 20, max: 20 } });
  // Several dials fail (one every 20 ms) before the driver comes up.
  await waitFor("a failed dial", () => conn.channelState === "failure");
  await serve(socket, identity("late.csi.example.com"));
  await waitFor("ready once the driver is up", () => ready.length === 1);
  assert.deepEqual(lines.filter((l) => String(l["message"]).startsWith("still waiting for driver")), [], "the first reminder is 10 s away");
});

test("a Probe that fails (not a timeout) fails the handshake: logged with its status, and tried again", async () => {
  const failure = Object.assign(new Error("probe broke"), { code: grpcStatus.INTERNAL, details: "probe broke", metadata: new Metadata() });
  const { lines, probes } = await probed((attempt) => (attempt === 1 ? failure : { ready: true }));
  assert.equal(probes, 2);
  const failed = lines.filter((l) => l["message"] === "driver handshake failed; retrying");
  assert.equal(failed.length, 1);
  assert.match(String(failed[0]!["error"]), /INTERNAL: probe broke/);
  assert.deepEqual(lines.filter((l) => String(l["message"]).startsWith("driver Probe timed out")), []);
});

test("a Probe that says not ready is asked again; said at the first attempt, not at every one", async () => {
  const { lines, probes } = await probed((attempt) => ({ ready: attempt > 2 }));
  assert.equal(probes, 3);
  const notReady = lines.filter((l) => l["message"] === "driver not ready yet (Probe ready=false)");
  assert.deepEqual(notReady.map((l) => l["attempt"]), [1]);
});

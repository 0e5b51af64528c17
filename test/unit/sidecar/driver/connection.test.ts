// A driver that answers but fails the handshake (here: an empty name from GetIdentity, which would
// label every metric with nothing) is not taken as ready: the sidecar says why at warn, tries
// again a second later, and is ready once the driver answers properly. A Probe that fails (not a
// timeout) fails the handshake the same way; a Probe that says not ready is asked again, said at
// the first attempt and every tenth. A driver not there yet is waited for quietly: "still
// waiting" is said every 10 s, not at every attempt. What the rest of the sidecar reads from a
// connection is checked here too: its calls told to the metrics, `ready` and `down`, close().
// unit tier: own process (its tests wait out the handshake's retry second, about 8 s in all).
import { after, test } from "node:test";
import assert from "node:assert/strict";
import diagnostics from "node:diagnostics_channel";
import { join } from "node:path";
import { Metadata, status as grpcStatus, type Server, type ServiceError } from "@grpc/grpc-js";
import {
  Capability_Service_Type,
  Capability_VolumeHealer_Type,
  IdentityService,
  type Capability,
  type IdentityServer,
} from "../../../../proto/gen/identity/identity.js";
import { DriverConnection, type DriverConnectionOptions, type DriverInfo, type ReadyEvent } from "../../../../sidecar/driver/connection.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { serveFakeDriver } from "../../../support/cluster.js";
import { tempDir } from "../../../support/proc.js";
import { waitFor } from "../../../support/wait.js";

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

/** A started connection to `socket`, logging into `lines` (at `level`), its ready events in `ready`. */
function connect(socket: string, more: Partial<DriverConnectionOptions> = {}, level = "info") {
  const { lines, logger } = captureLogger(level);
  const conn = new DriverConnection({ socketPath: socket, callTimeoutMs: 5_000, logger, ...more });
  opened.push(conn);
  const ready: ReadyEvent[] = [];
  conn.on("ready", (e) => ready.push(e));
  conn.start();
  return { conn, lines, ready };
}

/** A fake driver whose Probe answers with `probe(attempt)`; resolves once the connection is ready. */
async function probed(
  probe: (attempt: number) => { ready: boolean } | ServiceError,
  more: Partial<DriverConnectionOptions> = {},
): Promise<{ lines: Record<string, unknown>[]; probes: number; probedAt: number[] }> {
  const socket = join(tempDir(), "addons.sock");
  const probedAt: number[] = [];
  await serve(socket, {
    ...identity("probed.csi.example.com"),
    probe: (_c, cb) => {
      const answer = probe(probedAt.push(Date.now()));
      if ("code" in answer) cb(answer, null);
      else cb(null, answer);
    },
  });
  const { lines, ready } = connect(socket, more);
  await waitFor("ready", () => ready.length === 1);
  return { lines, probes: probedAt.length, probedAt };
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
  assert.deepEqual(
    lines.filter((l) => String(l["message"]).startsWith("still waiting for driver")),
    [],
    "the first reminder is 10 s away",
  );
});

test("a Probe that fails (not a timeout) fails the handshake: logged with its status, and tried again", async () => {
  const failure = Object.assign(new Error("probe broke"), { code: grpcStatus.INTERNAL, details: "probe broke", metadata: new Metadata() });
  const { lines, probes } = await probed((attempt) => (attempt === 1 ? failure : { ready: true }));
  assert.equal(probes, 2);
  const failed = lines.filter((l) => l["message"] === "driver handshake failed; retrying");
  assert.equal(failed.length, 1);
  assert.match(String(failed[0]!["error"]), /INTERNAL: probe broke/);
  assert.deepEqual(
    lines.filter((l) => String(l["message"]).startsWith("driver Probe timed out")),
    [],
  );
});

test("a Probe that says not ready is asked again a second later; said at the first attempt, not at every one", async () => {
  const { lines, probes, probedAt } = await probed((attempt) => ({ ready: attempt > 2 }));
  assert.equal(probes, 3);
  for (let i = 1; i < probedAt.length; i++)
    assert.ok(probedAt[i]! - probedAt[i - 1]! >= 950, `Probe ${i + 1} ${probedAt[i]! - probedAt[i - 1]!} ms after the one before`);
  const notReady = lines.filter((l) => l["message"] === "driver not ready yet (Probe ready=false)");
  assert.deepEqual(
    notReady.map((l) => l["attempt"]),
    [1],
  );
});

test("a driver not ready for a long time is said to be so at the first Probe and every tenth", async () => {
  const { lines, probes } = await probed((attempt) => ({ ready: attempt > 21 }), { retryMs: 10 });
  assert.equal(probes, 22);
  const notReady = lines.filter((l) => l["message"] === "driver not ready yet (Probe ready=false)");
  assert.deepEqual(
    notReady.map((l) => [l["level"], l["attempt"]]),
    [
      ["info", 1],
      ["info", 10],
      ["info", 20],
    ],
  );
});

test("every driver call is told to `observe` (the metrics): its method, its status, answered or failed, and its seconds", async () => {
  const socket = join(tempDir(), "addons.sock");
  await serve(socket, identity("observed.csi.example.com"));
  const observed: { method: string; code: number; seconds: number }[] = [];
  const { conn, ready } = connect(socket, { observe: (method, code, seconds) => void observed.push({ method, code, seconds }) });
  await waitFor("ready", () => ready.length === 1);
  assert.deepEqual(observed.map((o) => [o.method, o.code]).sort(), [
    ["/identity.Identity/GetCapabilities", grpcStatus.OK],
    ["/identity.Identity/GetIdentity", grpcStatus.OK],
    ["/identity.Identity/Probe", grpcStatus.OK],
  ]);

  const nope = { ...IdentityService.getIdentity, path: "/identity.Identity/Nope" };
  for (const def of [IdentityService.getIdentity, nope]) {
    observed.length = 0;
    const from = performance.now();
    await conn.call(def, {}, Date.now() + 5_000).catch(() => undefined);
    const took = (performance.now() - from) / 1000;
    assert.equal(observed.length, 1);
    assert.equal(observed[0]!.method, def.path);
    assert.equal(observed[0]!.code, def === nope ? grpcStatus.UNIMPLEMENTED : grpcStatus.OK);
    assert.ok(observed[0]!.seconds >= 0 && observed[0]!.seconds <= took, `${observed[0]!.seconds} s, the call took ${took} s`);
  }
});

test("`ready` is false until the first handshake and from the moment the connection is lost, which is logged at warn and told as `down`; close() closes the connection", async () => {
  const socket = join(tempDir(), "addons.sock");
  const server = await serve(socket, identity("lost.csi.example.com"));
  const { conn, lines, ready } = connect(socket);
  assert.equal(conn.ready, false, "not before the handshake");
  await waitFor("ready", () => ready.length === 1);
  assert.equal(conn.ready, true);
  const downs: { reason: string; ready: boolean }[] = [];
  conn.on("down", (reason) => void downs.push({ reason, ready: conn.ready }));
  server.forceShutdown();
  await waitFor("down", () => downs.length === 1);
  assert.deepEqual(downs, [{ reason: "connection lost", ready: false }]);
  const lost = lines.filter((l) => l["message"] === "driver connection lost; reconnecting");
  assert.deepEqual(
    lost.map((l) => [l["level"], l["socket"]]),
    [["warn", socket]],
  );

  conn.close();
  assert.equal(conn.channelState, "closed");
});

test("a `ready` listener that throws: the connection is told down with the error, not ready, and the handshake made again", async () => {
  const socket = join(tempDir(), "addons.sock");
  await serve(socket, identity("throwing.csi.example.com"));
  const { conn, lines, ready } = connect(socket);
  // Added after connect()'s own listener, before the handshake can end: it throws on the first ready.
  conn.on("ready", () => {
    if (ready.length === 1) throw new Error("listener broke");
  });
  const downs: { reason: string; ready: boolean }[] = [];
  conn.on("down", (reason) => void downs.push({ reason, ready: conn.ready }));
  await waitFor("ready a second time", () => ready.length === 2);
  assert.deepEqual(downs, [{ reason: "Error: listener broke", ready: false }]);
  assert.match(String(lines.find((l) => l["message"] === "driver handshake failed; retrying")?.["error"]), /listener broke/);
  assert.equal(conn.ready, true);
});

test("while no driver is there: reminded every waitLogIntervalMs at info with the seconds waited, and dialled with a backoff from 100 ms, not in a loop", async () => {
  const socket = join(tempDir(), "absent.sock");
  // Every dial is a new socket: count them (the test makes no other connection meanwhile).
  const dials: number[] = [];
  const onSocket = () => void dials.push(performance.now());
  diagnostics.subscribe("net.client.socket", onSocket);
  try {
    const started = Date.now();
    const { lines } = connect(socket, { waitLogIntervalMs: 100 });
    const reminders = () => lines.filter((l) => l["message"] === `still waiting for driver at ${socket}`);
    await waitFor("four dials", () => dials.length >= 4);
    await waitFor("three reminders", () => reminders().length >= 3);
    const elapsed = Date.now() - started;
    // The default backoff: 100, 160, 256 ms (±20 %) before the 2nd, 3rd and 4th dial.
    assert.ok(dials[3]! - dials[0]! >= 0.8 * (100 + 160 + 256), `four dials in ${dials[3]! - dials[0]!} ms`);
    const r = reminders();
    assert.ok(r.length <= elapsed / 100 + 1, `${r.length} reminders in ${elapsed} ms`);
    for (const l of r) {
      assert.equal(l["level"], "info");
      assert.ok(
        typeof l["waitedSeconds"] === "number" && l["waitedSeconds"] >= 0 && l["waitedSeconds"] <= Math.ceil(elapsed / 1000),
        `waitedSeconds ${l["waitedSeconds"]}`,
      );
    }
  } finally {
    diagnostics.unsubscribe("net.client.socket", onSocket);
  }
});

test("a driver socket that appears between dials is dialled at once, which is said at debug", async () => {
  const socket = join(tempDir(), "addons.sock");
  // A minute between dials and between reminders: only the socket's appearance can bring it up in time.
  const { conn, lines, ready } = connect(socket, { reconnectBackoffMs: { initial: 60_000, max: 60_000 }, waitLogIntervalMs: 60_000 }, "debug");
  await waitFor("a failed dial", () => conn.channelState === "failure");
  await serve(socket, identity("appearing.csi.example.com"));
  await waitFor("ready", () => ready.length === 1);
  const said = lines.filter((l) => l["message"] === "driver socket changed; dialling it now");
  assert.ok(said.length >= 1 && said.every((l) => l["level"] === "debug" && l["socket"] === socket), JSON.stringify(said));
});

test("what the driver can do, read from its capabilities: node or controller service, health and heal, each on its own", async () => {
  const service = (type: Capability_Service_Type): Capability => ({ type: { $case: "service", service: { type } } });
  const healer = (type: Capability_VolumeHealer_Type): Capability => ({ type: { $case: "volumeHealer", volumeHealer: { type } } });
  const cases: [Capability[], Partial<DriverInfo>][] = [
    [
      [service(Capability_Service_Type.NODE_SERVICE), healer(Capability_VolumeHealer_Type.GET_VOLUME_HEALTH)],
      { nodeService: true, controllerService: false, getVolumeHealth: true, healVolume: false },
    ],
    [
      [service(Capability_Service_Type.CONTROLLER_SERVICE), healer(Capability_VolumeHealer_Type.HEAL_VOLUME)],
      { nodeService: false, controllerService: true, getVolumeHealth: false, healVolume: true },
    ],
  ];
  for (const [capabilities, expected] of cases) {
    const socket = join(tempDir(), "addons.sock");
    await serve(socket, { ...identity("capable.csi.example.com"), getCapabilities: (_c, cb) => cb(null, { capabilities }) });
    const { ready } = connect(socket);
    await waitFor("ready", () => ready.length === 1);
    const { nodeService, controllerService, getVolumeHealth, healVolume } = ready[0]!.info;
    assert.deepEqual({ nodeService, controllerService, getVolumeHealth, healVolume }, expected);
  }
});

test("a Probe that does not answer is given up after the call timeout (under 10 s), said, and asked again a second later", async () => {
  const socket = join(tempDir(), "addons.sock");
  let probes = 0;
  await serve(socket, {
    ...identity("slow-probe.csi.example.com"),
    // The first Probe never answers (the server's shutdown ends it); the second says ready.
    probe: (_c, cb) => void (++probes > 1 && cb(null, { ready: true })),
  });
  const { lines, ready } = connect(socket, { callTimeoutMs: 300 });
  await waitFor("ready after the second Probe", () => ready.length === 1, { timeoutMs: 5_000 });
  assert.equal(probes, 2);
  assert.deepEqual(
    lines.filter((l) => l["message"] === "driver Probe timed out; retrying").map((l) => [l["level"], l["attempt"]]),
    [["info", 1]],
  );
});

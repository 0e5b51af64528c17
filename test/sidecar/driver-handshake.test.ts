// A driver that answers but fails the handshake (here: an empty name from GetIdentity, which would
// label every metric with nothing) is not taken as ready: the sidecar says why at warn, tries
// again, and is ready once the driver answers properly.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import type * as grpc from "@grpc/grpc-js";
import { IdentityService, type IdentityServer } from "../../proto/gen/identity/identity.js";
import { DriverConnection, type ReadyEvent } from "../../sidecar/driver/connection.js";
import { captureLogger } from "../support/capture-logger.js";
import { serveFakeDriver } from "../support/cluster.js";
import { tempDir } from "../support/proc.js";
import { waitFor } from "../support/wait.js";

let server: grpc.Server | undefined;
let conn: DriverConnection | undefined;

after(() => {
  conn?.close();
  server?.forceShutdown();
});

test("a failed handshake is logged with its reason and retried until the driver answers properly", async () => {
  const socket = join(tempDir(), "addons.sock");
  let identityCalls = 0;
  const impl: IdentityServer = {
    getIdentity: (_c, cb) => cb(null, { name: ++identityCalls === 1 ? "" : "handshake.csi.example.com", vendorVersion: "1.0.0", manifest: {} }),
    getCapabilities: (_c, cb) => cb(null, { capabilities: [] }),
    probe: (_c, cb) => cb(null, { ready: true }),
  };
  server = await serveFakeDriver(socket, IdentityService, impl);
  const { lines, logger } = captureLogger();
  conn = new DriverConnection({ socketPath: socket, callTimeoutMs: 5_000, logger });
  const ready: ReadyEvent[] = [];
  conn.on("ready", (e) => ready.push(e));
  conn.start();
  await waitFor("ready after the retry", () => ready.length === 1);
  assert.equal(identityCalls, 2);
  assert.equal(ready[0]!.info.name, "handshake.csi.example.com");
  const failed = lines.filter((l) => l["message"] === "driver handshake failed; retrying");
  assert.equal(failed.length, 1, JSON.stringify(lines));
  assert.equal(failed[0]!["level"], "warn");
  assert.equal(failed[0]!["socket"], socket);
  assert.match(String(failed[0]!["error"]), /empty name from GetIdentity/);
});

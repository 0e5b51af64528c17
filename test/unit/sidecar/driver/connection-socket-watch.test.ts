// A restarted driver is dialled when its socket appears, not when a reconnect backoff
// expires. The connection here backs off a whole minute between attempts (and reminds that it is
// waiting only once a minute), so only the socket watch can bring it back within the test's
// deadline; the fake driver restarts twice.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import type * as grpc from "@grpc/grpc-js";
import { IdentityService, type IdentityServer } from "../../../../proto/gen/identity/identity.js";
import { DriverConnection, type ReadyEvent } from "../../../../sidecar/driver/connection.js";
import { createLogger } from "../../../../common/log/logger.js";
import { serveFakeDriver } from "../../../support/cluster.js";
import { tempDir } from "../../../support/proc.js";
import { waitFor } from "../../../support/wait.js";

const BACKOFF_MS = 60_000;
let server: grpc.Server | undefined;
let conn: DriverConnection | undefined;

async function serveDriver(socket: string, bootId: string): Promise<void> {
  const impl: IdentityServer = {
    getIdentity: (_c, cb) => cb(null, { name: "watch.csi.example.com", vendorVersion: "1.0.0", manifest: { bootId } }),
    getCapabilities: (_c, cb) => cb(null, { capabilities: [] }),
    probe: (_c, cb) => cb(null, { ready: true }),
  };
  server = await serveFakeDriver(socket, IdentityService, impl);
}

after(() => {
  conn?.close();
  server?.forceShutdown();
});

test("a driver that comes back is dialled when its socket appears, without waiting out the reconnect backoff", { timeout: 60_000 }, async () => {
  const socket = join(tempDir(), "addons.sock");
  await serveDriver(socket, "boot-1");
  // The "still waiting" reminder also wakes the wait (and dials anew): a minute away too.
  conn = new DriverConnection({
    socketPath: socket,
    callTimeoutMs: 5_000,
    logger: createLogger("error", "json"),
    reconnectBackoffMs: { initial: BACKOFF_MS, max: BACKOFF_MS },
    waitLogIntervalMs: BACKOFF_MS,
  });
  const ready: ReadyEvent[] = [];
  let downs = 0;
  conn.on("ready", (e) => ready.push(e));
  conn.on("down", () => downs++);
  conn.start();
  await waitFor("the first connection", () => ready.length === 1);

  for (const bootId of ["boot-2", "boot-3"]) {
    const before = ready.length;
    server!.forceShutdown();
    await waitFor("the sidecar to see the driver gone", () => downs === before);
    // Gone long enough for the connection to try (and fail) at least once: its next try is a minute away.
    await waitFor("a failed dial", () => conn!.channelState === "failure");
    await serveDriver(socket, bootId);
    await waitFor(`ready again after ${bootId} started`, () => ready.length === before + 1, { timeoutMs: 15_000 });
    assert.equal(ready.at(-1)!.restarted, true, "a new boot id is a restart");
    assert.equal(ready.at(-1)!.info.manifest["bootId"], bootId);
  }
});

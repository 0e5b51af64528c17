// What counts as a driver restart: a new boot id. A reconnection to the same boot (the driver
// restarted only its gRPC server; its mounts are intact) must not make the controller heal.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { IdentityService, type IdentityServer } from "../../../proto/gen/identity/identity.js";
import type { KubeApi } from "../../kube/index.js";
import { serveFakeDriver, startTestKube } from "../../support/cluster.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";
import { CSI_ADDONS_NODE_NAME, NAMESPACE } from "../../support/fixtures.js";

const RESTARTED_AT = "sidecar.csiaddons.openshift.io/driverRestartedAt";
let kube: KubeApi;
let sidecar: SidecarProc;
let socket: string;
let server: grpc.Server | undefined;

async function serveDriver(bootId: string, name = "boot.csi.example.com"): Promise<void> {
  server?.forceShutdown();
  const impl: IdentityServer = {
    getIdentity: (_c, cb) => cb(null, { name, vendorVersion: "1.0.0", manifest: { bootId } }),
    getCapabilities: (_c, cb) => cb(null, { capabilities: [] }),
    probe: (_c, cb) => cb(null, { ready: true }),
  };
  server = await serveFakeDriver(socket, IdentityService, impl);
}

const readyLines = () => sidecar.logLines().filter((l) => l.message === "driver ready");
const stored = () => kube.get("csiaddons.openshift.io/v1alpha1", "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as any;
const restartedAt = () => stored()?.metadata.annotations?.[RESTARTED_AT];

before(async () => {
  socket = join(tempDir(), "addons.sock");
  await serveDriver("boot-A");
  kube = await startTestKube();
  sidecar = await startSidecarProc({ driverSocket: socket, kubeconfig: kube.kubeconfigPath });
  await waitHealth(sidecar, "SERVING");
});

after(async () => {
  await sidecar?.stop();
  server?.forceShutdown();
  await kube?.stop();
});

test("a reconnection to the same boot id is not a restart; a new boot id is", async () => {
  await serveDriver("boot-A");
  await waitFor("the sidecar to reconnect", () => readyLines().length === 2);
  assert.equal(readyLines()[1]!.restarted, false);
  await waitHealth(sidecar, "SERVING");
  assert.equal(restartedAt(), undefined, "no heal requested for intact mounts");

  await serveDriver("boot-B");
  await waitFor("the sidecar to reconnect again", () => readyLines().length === 3);
  assert.equal(readyLines()[2]!.restarted, true);
  await waitFor("driverRestartedAt recorded", () => restartedAt());
});

test("a driver that comes back under another name: the CSIAddonsNode is made again naming it (the driver name is immutable there)", async () => {
  const uid = stored().metadata.uid;
  await serveDriver("boot-C", "renamed.csi.example.com");
  await waitFor("the CSIAddonsNode to name the new driver", () => stored()?.spec.driver.name === "renamed.csi.example.com");
  assert.notEqual(stored().metadata.uid, uid, "replaced, not updated: the API refuses a new driver name on the old object");
  await waitHealth(sidecar, "SERVING");
});

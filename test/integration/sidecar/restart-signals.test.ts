// The restart signals the sidecar records (DESIGN 4.2, 4.3), with a real sidecar process and a
// hand-written driver whose boot id each test chooses:
// - driver and sidecar restarted together: the boot id kept on the CSIAddonsNode differs → driverRestartedAt;
// - the sidecar restarted alone (same boot id) → nothing;
// - a driver without a boot id whose connection drops → driverReconnectedAt, never driverRestartedAt;
// - the object deleted → made again with the restart annotations and the controller's handled marker it last showed.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import type * as grpc from "@grpc/grpc-js";
import { IdentityService, type IdentityServer } from "../../../proto/gen/identity/identity.js";
import type { KubeApi } from "../../kube/index.js";
import { serveFakeDriver, startTestKube } from "../../support/cluster.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";
import { CSI_ADDONS_NODE_NAME, HANDLED_RESTART, NAMESPACE } from "../../support/fixtures.js";

const CAN = "csiaddons.openshift.io/v1alpha1";
const RESTARTED_AT = "sidecar.csiaddons.openshift.io/driverRestartedAt";
const RECONNECTED_AT = "sidecar.csiaddons.openshift.io/driverReconnectedAt";
const BOOT_ID = "sidecar.csiaddons.openshift.io/driverBootId";

let kube: KubeApi;
let sidecar: SidecarProc | undefined;
let socket: string;
let server: grpc.Server | undefined;

/** Serves a driver on the socket; `bootId` undefined: a driver whose manifest has none. */
async function serveDriver(bootId: string | undefined): Promise<void> {
  server?.forceShutdown();
  const impl: IdentityServer = {
    getIdentity: (_c, cb) => cb(null, { name: "boot.csi.example.com", vendorVersion: "1.0.0", manifest: bootId === undefined ? {} : { bootId } }),
    getCapabilities: (_c, cb) => cb(null, { capabilities: [] }),
    probe: (_c, cb) => cb(null, { ready: true }),
  };
  server = await serveFakeDriver(socket, IdentityService, impl);
}

const stored = () =>
  kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as { metadata: { uid: string; annotations?: Record<string, string> } } | undefined;
const annotation = (key: string) => stored()?.metadata.annotations?.[key];
const readyLines = () => sidecar!.logLines().filter((l) => l.message === "driver ready");

async function startSidecar(): Promise<SidecarProc> {
  sidecar = await startSidecarProc({ driverSocket: socket, kubeconfig: kube.kubeconfigPath });
  await waitHealth(sidecar, "SERVING");
  return sidecar;
}

before(async () => {
  socket = join(tempDir(), "addons.sock");
  kube = await startTestKube();
});

after(async () => {
  await sidecar?.stop();
  server?.forceShutdown();
  await kube?.stop();
});

test("driver and sidecar restarted together: the boot id kept on the CSIAddonsNode tells the restart; the sidecar restarted alone records nothing", async () => {
  await serveDriver("boot-1");
  await startSidecar();
  await waitFor("the boot id kept on the CSIAddonsNode", () => annotation(BOOT_ID) === "boot-1");
  assert.equal(annotation(RESTARTED_AT), undefined, "a first start is not a restart");

  // The sidecar alone: the driver (and its mounts) lived on.
  await sidecar!.stop();
  await startSidecar();
  await waitFor("the new sidecar to write the object", () => sidecar!.logLines().some((l) => l.message === "updated CSIAddonsNode"));
  assert.equal(annotation(RESTARTED_AT), undefined, "same boot id: nothing died");

  // Both at once (container runtime restart, node reboot keeping the pod).
  await sidecar!.stop();
  await serveDriver("boot-2");
  await startSidecar();
  const at = await waitFor("driverRestartedAt recorded by the new sidecar", () => annotation(RESTARTED_AT));
  assert.equal(annotation(BOOT_ID), "boot-2");
  assert.ok(sidecar!.logLines().some((l) => /while this sidecar was down/.test(String(l.message)) && l.was === "boot-1"));
  assert.ok(Date.parse(at) > 0);
});

test("a driver with a boot id whose connection drops without a restart records nothing", async () => {
  const before = stored()!.metadata.annotations!;
  const lines = readyLines().length;
  await serveDriver("boot-2"); // the same process's server again: a GOAWAY, a socket blip
  await waitFor("the sidecar to reconnect", () => readyLines().length === lines + 1);
  await waitHealth(sidecar!, "SERVING");
  assert.equal(annotation(RESTARTED_AT), before[RESTARTED_AT]);
  assert.equal(annotation(RECONNECTED_AT), undefined);
});

test("a driver without a boot id whose connection drops: driverReconnectedAt, never driverRestartedAt", async () => {
  const restartedAt = annotation(RESTARTED_AT);
  const lostLines = () => sidecar!.logLines().filter((l) => String(l.message).startsWith("driver connection lost and back"));
  const lostBefore = lostLines().length;
  // A driver that stops reporting a boot id (another version), then loses its connection once more.
  // Each blip is one reconnection the sidecar saw (it was ready in between), so each is recorded;
  // the record's log line may reach us after the "driver ready" line it follows.
  for (const blip of [1, 2]) {
    const lines = readyLines().length;
    await serveDriver(undefined);
    await waitFor(`reconnection ${blip}`, () => readyLines().length === lines + 1);
    await waitFor(`reconnection ${blip} recorded`, () => lostLines().length === lostBefore + blip);
  }
  // The second may replace the first before it is written: wait for the object to show the one
  // recorded last, which is later than the first's log line (the first's own time is not).
  const first = Date.parse(String(lostLines().at(-2)!.timestamp));
  await waitFor("the second reconnection's driverReconnectedAt on the object", () => {
    const v = annotation(RECONNECTED_AT);
    return v !== undefined && Date.parse(v) > first ? v : undefined;
  });
  assert.equal(lostLines().length, lostBefore + 2, "each reconnection of a driver without a boot id is recorded once");
  assert.equal(annotation(RESTARTED_AT), restartedAt, "a lost connection without a boot id is never recorded as a restart");
});

test("the CSIAddonsNode deleted: made again with the restart annotations and the handled marker it last showed", async () => {
  // The controller's marker, as it writes it (a merge patch of that one annotation).
  const obj = stored()!;
  const marker = "controller-wrote-this";
  kube.update({ ...obj, metadata: { ...obj.metadata, annotations: { ...obj.metadata.annotations, [HANDLED_RESTART]: marker } } } as never);
  // What it carries is what it saw: wait until its watch showed it the object as it stands now.
  const want = { ...stored()!.metadata.annotations! };
  const carried = [RESTARTED_AT, RECONNECTED_AT, BOOT_ID, HANDLED_RESTART];
  await waitFor("the sidecar to see the handled marker", () =>
    sidecar!
      .logLines()
      .some((l) => l.message === "CSIAddonsNode restart annotations" && carried.every((k) => (l.annotations as Record<string, string>)[k] === want[k])),
  );
  assert.deepEqual(stored()!.metadata.annotations, want, "nothing wrote the object since");
  kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
  const recreated = await waitFor("the CSIAddonsNode made again", () => (stored()?.metadata.uid !== obj.metadata.uid ? stored() : undefined), {
    timeoutMs: 30_000,
  });
  for (const key of carried) {
    assert.equal(recreated.metadata.annotations?.[key], want[key], `${key} carried onto the new object`);
  }
});

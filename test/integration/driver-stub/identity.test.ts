// The addons identity service and the CSI identity service of a real driver-stub process.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { describe, it } from "node:test";
import { Capability_Service_Type as Service, Capability_VolumeHealer_Type as Healer } from "../../../proto/gen/identity/identity.js";
import { restartDriverStub, startDriverStub } from "../../support/driver-stub.js";
import { stubClients } from "../../support/driver-stub-clients.js";
import { withStub } from "../../support/driver-stub-fixture.js";

const packageVersion = (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const service = { type: { $case: "service" as const, service: { type: Service.NODE_SERVICE } } };
const healer = (type: Healer) => ({ type: { $case: "volumeHealer" as const, volumeHealer: { type } } });

describe("driver-stub identity", () => {
  const fx = withStub({ name: "identity.csi.example.com" });

  it("GetIdentity: name from --name, vendor_version the package version, a UUID boot id in the manifest", async () => {
    const id = await fx.c.getIdentity();
    assert.equal(id.name, "identity.csi.example.com");
    assert.equal(id.vendorVersion, packageVersion);
    assert.deepEqual(Object.keys(id.manifest), ["bootId"]);
    assert.match(id.manifest.bootId!, UUID);
    assert.equal((await fx.c.getIdentity()).manifest.bootId, id.manifest.bootId, "stable within one process");
  });

  it("GetCapabilities: NODE_SERVICE, GET_VOLUME_HEALTH and HEAL_VOLUME with no state file", async () => {
    const caps = await fx.c.getCapabilities();
    assert.deepEqual(caps.capabilities, [service, healer(Healer.GET_VOLUME_HEALTH), healer(Healer.HEAL_VOLUME)]);
  });

  it("capabilities switched off in the state file disappear without a restart", async (t) => {
    t.after(() => fx.stub.setState({}));
    fx.stub.setState({ capabilities: { healVolume: false } });
    assert.deepEqual((await fx.c.getCapabilities()).capabilities, [service, healer(Healer.GET_VOLUME_HEALTH)]);
    fx.stub.setState({ capabilities: { getVolumeHealth: false } });
    assert.deepEqual((await fx.c.getCapabilities()).capabilities, [service, healer(Healer.HEAL_VOLUME)]);
    fx.stub.setState({ capabilities: { getVolumeHealth: false, healVolume: false } });
    assert.deepEqual((await fx.c.getCapabilities()).capabilities, [service]);
    fx.stub.setState({ capabilities: { getVolumeHealth: true, healVolume: true } });
    assert.equal((await fx.c.getCapabilities()).capabilities.length, 3);
  });

  it("controllerService in the state file adds Service CONTROLLER_SERVICE (a controller plugin)", async (t) => {
    t.after(() => fx.stub.setState({}));
    fx.stub.setState({ capabilities: { controllerService: true } });
    const controller = { type: { $case: "service" as const, service: { type: Service.CONTROLLER_SERVICE } } };
    assert.deepEqual((await fx.c.getCapabilities()).capabilities, [service, healer(Healer.GET_VOLUME_HEALTH), healer(Healer.HEAL_VOLUME), controller]);
  });

  it("Probe answers ready=true explicitly, and follows `ready` in the state file without a restart", async (t) => {
    t.after(() => fx.stub.setState({}));
    assert.deepEqual(await fx.c.probe(), { ready: true });
    fx.stub.setState({ ready: false });
    assert.deepEqual(await fx.c.probe(), { ready: false });
    assert.deepEqual(await fx.c.csiProbe(), { ready: false }, "the CSI socket's Probe agrees");
    fx.stub.updateState((s) => ({ ...s, ready: true }));
    assert.deepEqual(await fx.c.probe(), { ready: true });
  });

  it("the CSI socket describes the same driver: GetPluginInfo, no plugin capabilities, node capabilities", async () => {
    const [id, info] = await Promise.all([fx.c.getIdentity(), fx.c.getPluginInfo()]);
    assert.deepEqual(info, id);
    assert.deepEqual(await fx.c.getPluginCapabilities(), { capabilities: [] });
    const node = await fx.c.nodeGetCapabilities();
    assert.deepEqual(
      node.capabilities.map((cap) => cap.type?.$case === "rpc" && cap.type.rpc.type),
      [1 /* STAGE_UNSTAGE_VOLUME */],
    );
    // The machine's name, no volume limit (0: the kubelet then sets none), no topology.
    assert.deepEqual(await fx.c.nodeGetInfo(), { nodeId: hostname(), maxVolumesPerNode: 0, accessibleTopology: undefined });
  });
});

describe("driver-stub boot id", () => {
  it("is fresh after every restart, graceful or crash", async (t) => {
    let stub = await startDriverStub();
    t.after(() => stub.stop());
    const bootId = async () => {
      const c = stubClients(stub);
      try {
        return (await c.getIdentity()).manifest.bootId;
      } finally {
        c.close();
      }
    };
    const first = await bootId();
    stub = await restartDriverStub(stub);
    const second = await bootId();
    await stub.kill();
    stub = await restartDriverStub(stub);
    const third = await bootId();
    assert.equal(new Set([first, second, third]).size, 3, `boot ids ${first} ${second} ${third}`);
  });
});

// The upstream services that name a Secret (proto.NetworkFence, proto.Replication,
// proto.VolumeGroupController) through the sidecar, played as the upstream csi-addons controller:
// parameters, CIDRs, sources and ids as given, the named Secret's data as secrets, the upstream
// sidecar's codes for a missing secret, UNIMPLEMENTED without a driver call, nothing on the CSI socket.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { waitFor } from "../../support/wait.js";
import { GetVolumeReplicationInfoResponse_Status as ReplicationStatus } from "../../../proto/gen/proto/replication.js";
import { codeName, type Outcome } from "../../support/grpc.js";
import { pv, secret } from "../../support/fixtures.js";
import { bytes } from "../../support/wire-vectors.js";
import { logged, upstreamFixture } from "../../support/upstream-harness.js";

const SECRET_VALUE = "AQD-fence-key-never-logged-81c4";
const SECRETS = { userID: "csi-rbd-provisioner", userKey: SECRET_VALUE };
const OPS_NS = "storage-ops";
const named = { secretName: "ceph-secret", secretNamespace: OPS_NS };
const missing = { secretName: "no-such-secret", secretNamespace: OPS_NS };
const code = (r: Outcome<unknown>) => (r.ok ? "OK" : codeName(r.code));
const vol = (volumeId: string) => ({ type: { $case: "volume" as const, volume: { volumeId } } });
const grp = (volumeGroupId: string) => ({ type: { $case: "volumeGroup" as const, volumeGroup: { volumeGroupId } } });

describe("upstream NetworkFence, Replication and VolumeGroupController through the sidecar", () => {
  const fx = upstreamFixture(
    [{ apiVersion: "v1", kind: "Namespace", metadata: { name: OPS_NS } }, secret(OPS_NS, "ceph-secret", SECRETS), pv("pv-file", { handle: "vol-file" })],
    {
      // ReclaimSpace stays off: its methods must answer UNIMPLEMENTED without a driver call.
      capabilities: { networkFence: true, getClientsToFence: true, volumeReplication: true, replicationDestinationInfo: true, volumeGroup: true },
      fenceClients: [{ id: "fsid-1", addresses: ["10.8.0.7/32"] }],
    },
  );

  test("FenceClusterNetwork and UnFenceClusterNetwork: parameters, CIDRs and the named Secret's data reach the driver", async () => {
    const req = { ...named, parameters: { clusterID: "c1" }, cidrs: ["10.8.0.0/24", "fd00::/64"] };
    assert.equal(code(await fx.up.fenceClusterNetwork(req)), "OK");
    assert.deepEqual(fx.stub.readState().fenced, ["10.8.0.0/24", "fd00::/64"]);
    const [f] = fx.driverCalls("/fence.FenceController/FenceClusterNetwork");
    assert.deepEqual(f!.request, { parameters: { clusterID: "c1" }, secrets: logged(SECRETS), cidrs: [{ cidr: "10.8.0.0/24" }, { cidr: "fd00::/64" }] });
    assert.equal(code(await fx.up.unFenceClusterNetwork({ ...req, cidrs: ["10.8.0.0/24"] })), "OK");
    assert.deepEqual(fx.stub.readState().fenced, ["fd00::/64"]);
    const [u] = fx.driverCalls("/fence.FenceController/UnfenceClusterNetwork");
    assert.deepEqual(u!.request, { parameters: { clusterID: "c1" }, secrets: logged(SECRETS), cidrs: [{ cidr: "10.8.0.0/24" }] });
  });

  test("GetFenceClients: the driver's clients come back with their CIDRs", async () => {
    const r = await fx.up.getFenceClients({ ...named, parameters: { clusterID: "c1" } });
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(r.value, { clients: [{ id: "fsid-1", cidrs: ["10.8.0.7/32"] }] });
    const [c] = fx.driverCalls("/fence.FenceController/GetFenceClients");
    assert.deepEqual(c!.request, { parameters: { clusterID: "c1" }, secrets: logged(SECRETS) });
  });

  test("GetFenceClients naming no Secret reads none and calls the driver without secrets (as upstream); the methods that always read one still refuse", async () => {
    const reads = fx.kube.counters.get("get", "secrets");
    const r = await fx.up.getFenceClients({ parameters: { clusterID: "c1" } });
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(r.value, { clients: [{ id: "fsid-1", cidrs: ["10.8.0.7/32"] }] });
    const c = fx.driverCalls("/fence.FenceController/GetFenceClients").at(-1)!;
    assert.deepEqual(c.request, { parameters: { clusterID: "c1" } }, "no secrets reach the driver");
    assert.equal(fx.kube.counters.get("get", "secrets"), reads, "no Secret was read");
    // Upstream reads the Secret unconditionally for these; an empty name is refused with its codes.
    const before = fx.stub.calls({ server: "addons" }).length;
    const none = { secretName: "", secretNamespace: "" };
    assert.equal(code(await fx.up.fenceClusterNetwork({ ...none, cidrs: ["10.0.0.0/8"] })), "INVALID_ARGUMENT");
    assert.equal(code(await fx.up.unFenceClusterNetwork({ ...none, cidrs: ["10.0.0.0/8"] })), "INVALID_ARGUMENT");
    assert.equal(code(await fx.up.enable({ ...none, replicationSource: vol("vol-n") })), "INTERNAL");
    assert.equal(code(await fx.up.createGroup({ ...none, name: "g-none" })), "INTERNAL");
    assert.equal(fx.stub.calls({ server: "addons" }).length, before);
  });

  test("a Secret created after a call found it missing is read by the next call, well within --secret-cache-ttl", async () => {
    const late = { secretName: "late-secret", secretNamespace: OPS_NS };
    const req = { ...late, cidrs: ["10.7.0.0/24"] };
    const r = await fx.up.fenceClusterNetwork(req);
    assert.equal(code(r), "INVALID_ARGUMENT");
    assert.match((r as { details: string }).details, /late-secret.*not found/);
    await fx.kube.create(secret(OPS_NS, "late-secret", SECRETS));
    assert.equal(code(await fx.up.fenceClusterNetwork(req)), "OK", "the operator's fix is seen at once");
    const f = fx.driverCalls("/fence.FenceController/FenceClusterNetwork").at(-1)!;
    assert.deepEqual(f.request, { secrets: logged(SECRETS), cidrs: [{ cidr: "10.7.0.0/24" }] });
    assert.equal(code(await fx.up.unFenceClusterNetwork(req)), "OK");
  });

  test("a fence whose Secret is missing or misnamed is INVALID_ARGUMENT (as upstream), and the driver is not called", async () => {
    const before = fx.stub.calls({ server: "addons" }).length;
    for (const s of [missing, { secretName: "", secretNamespace: OPS_NS }, { secretName: "ceph-secret", secretNamespace: "../kube-system" }]) {
      const r = await fx.up.fenceClusterNetwork({ ...s, cidrs: ["10.0.0.0/8"] });
      assert.equal(code(r), "INVALID_ARGUMENT", JSON.stringify(s));
      assert.equal(code(await fx.up.getFenceClients(s)), "INVALID_ARGUMENT", JSON.stringify(s));
    }
    const r = await fx.up.fenceClusterNetwork({ ...missing, cidrs: ["10.0.0.0/8"] });
    assert.match((r as { details: string }).details, /secret "storage-ops"\/"no-such-secret": not found/);
    assert.equal(fx.stub.calls({ server: "addons" }).length, before);
  });

  test("the driver's own status passes through: a CIDR it rejects is its INVALID_ARGUMENT", async () => {
    const r = await fx.up.fenceClusterNetwork({ ...named, cidrs: ["not-a-cidr"] });
    assert.equal(code(r), "INVALID_ARGUMENT");
    assert.match((r as { details: string }).details, /"not-a-cidr" is not a CIDR block/);
    assert.equal(fx.driverCalls("FenceClusterNetwork").at(-1)?.code, "INVALID_ARGUMENT", "the driver answered it");
  });

  test("replication of a volume: enable, demote, promote, resync, info, destination info, disable", async () => {
    const base = { ...named, replicationSource: vol("vol-r"), replicationId: "rid-1", parameters: { schedulingInterval: "5m" } };
    // Every driver answer passes through, from the methods that answer nothing on success too.
    for (const before of [fx.up.promote, fx.up.demote, fx.up.resync, fx.up.info]) {
      assert.equal(code(await before(base)), "FAILED_PRECONDITION", `${before.name}: the driver's answer before enable passes through`);
    }
    assert.equal(code(await fx.up.enable(base)), "OK");
    assert.equal(code(await fx.up.demote({ ...base, force: true })), "OK");
    assert.equal(fx.stub.readState().replication?.["volume:vol-r"]?.role, "secondary");
    assert.equal(code(await fx.up.promote({ ...base, force: true })), "OK");
    const resync = await fx.up.resync(base);
    assert.ok(resync.ok && resync.value.ready === true, JSON.stringify(resync));
    const info = await fx.up.info(base);
    assert.ok(info.ok, JSON.stringify(info));
    assert.equal(info.value.status, ReplicationStatus.HEALTHY);
    assert.equal(info.value.lastSyncTime?.toISOString(), fx.stub.readState().replication?.["volume:vol-r"]?.lastSyncTime);
    const dest = await fx.up.destination({ ...named, replicationSource: vol("vol-r") });
    assert.ok(dest.ok, JSON.stringify(dest));
    assert.deepEqual(dest.value.replicationDestination, { type: { $case: "volume", volume: { volumeId: "vol-r" } } });

    const [enable] = fx.driverCalls("/replication.Controller/EnableVolumeReplication");
    assert.deepEqual(enable!.request, {
      volumeId: "vol-r",
      parameters: { schedulingInterval: "5m" },
      secrets: logged(SECRETS),
      replicationId: "rid-1",
      replicationSource: { volume: { volumeId: "vol-r" } },
    });
    const promote = fx.driverCalls("/replication.Controller/PromoteVolume").at(-1)!;
    assert.deepEqual(promote.request, {
      volumeId: "vol-r",
      force: true,
      parameters: { schedulingInterval: "5m" },
      secrets: logged(SECRETS),
      replicationId: "rid-1",
      replicationSource: { volume: { volumeId: "vol-r" } },
    });
    const [destCall] = fx.driverCalls("/replication.Controller/GetReplicationDestinationInfo");
    assert.deepEqual(destCall!.request, { replicationSource: { volume: { volumeId: "vol-r" } }, secrets: logged(SECRETS) });
    assert.equal(code(await fx.up.disable(base)), "OK");
    assert.equal(fx.stub.readState().replication?.["volume:vol-r"]?.enabled, false);
  });

  test("replication of a volume group, and an older controller naming the volume in volume_id", async () => {
    fx.stub.updateState((s) => void (s.groups = { "group-rg": { name: "rg", volumeIds: ["v1", "v2"] } }));
    assert.equal(code(await fx.up.enable({ ...named, replicationSource: grp("group-rg") })), "OK");
    const dest = await fx.up.destination({ ...named, replicationSource: grp("group-rg") });
    assert.ok(dest.ok, JSON.stringify(dest));
    assert.deepEqual(dest.value.replicationDestination, {
      type: { $case: "volumegroup", volumegroup: { volumeGroupId: "group-rg", volumeIds: { v1: "v1", v2: "v2" } } },
    });
    assert.equal(code(await fx.up.enable({ ...named, volumeId: "vol-old" })), "OK");
    assert.equal(fx.stub.readState().replication?.["volume:vol-old"]?.enabled, true);
    const old = fx.driverCalls("EnableVolumeReplication").at(-1)!;
    assert.deepEqual(old.request, { volumeId: "vol-old", secrets: logged(SECRETS), replicationSource: { volume: { volumeId: "vol-old" } } });
  });

  test("GetReplicationDestinationInfo in the upstream controller's bytes (secret_name 1, secret_namespace 2, replication_source 3): the named Secret and the source reach the driver", async () => {
    assert.equal(code(await fx.up.enable({ ...named, replicationSource: vol("vol-wire") })), "OK");
    fx.stub.updateState((s) => void (s.replication!["volume:vol-wire"]!.destination = "vol-wire-dr"));
    const text = (s: string) => Buffer.from(s).toString("hex");
    // Written from upstream's field numbers; a source or secret read from the wrong number misses the Secret or the volume.
    const request = bytes(`0a 0b ${text("ceph-secret")}  12 0b ${text(OPS_NS)}  1a 0c 0a 0a 0a 08 ${text("vol-wire")}`);
    const r = await fx.up.raw("/proto.Replication/GetReplicationDestinationInfo", request);
    assert.equal(codeName(r.code), "OK", r.details);
    // replication_destination 1 {volume 1 {volume_id 1}}
    assert.equal(r.value.toString("hex"), Buffer.from(bytes(`0a 0f 0a 0d 0a 0b ${text("vol-wire-dr")}`)).toString("hex"));
    const sent = fx.driverCalls("/replication.Controller/GetReplicationDestinationInfo").at(-1)!;
    assert.deepEqual(sent.request, { secrets: logged(SECRETS), replicationSource: { volume: { volumeId: "vol-wire" } } });
  });

  test("replication: a missing Secret is INTERNAL (as upstream), no source is INVALID_ARGUMENT; the driver is not called", async () => {
    const before = fx.stub.calls({ server: "addons" }).length;
    const r = await fx.up.enable({ ...missing, replicationSource: vol("vol-x") });
    assert.equal(code(r), "INTERNAL");
    assert.match((r as { details: string }).details, /no-such-secret.*not found/);
    assert.equal(code(await fx.up.info({ ...missing, replicationSource: vol("vol-x") })), "INTERNAL");
    assert.equal(code(await fx.up.enable({ ...named })), "INVALID_ARGUMENT");
    assert.equal(code(await fx.up.destination({ ...named })), "INVALID_ARGUMENT");
    assert.equal(fx.stub.calls({ server: "addons" }).length, before);
  });

  test("volume groups: create, modify, get, delete; the driver's members reduced to volume ids", async () => {
    const created = await fx.up.createGroup({ ...named, name: "g1", parameters: { pool: "rbd" }, volumeIds: ["v1"] });
    assert.ok(created.ok, JSON.stringify(created));
    assert.deepEqual(created.value.volumeGroup, { volumeGroupId: "group-g1", volumeGroupContext: {}, volumeIds: ["v1"] });
    const [c] = fx.driverCalls("/volumegroup.Controller/CreateVolumeGroup");
    assert.deepEqual(c!.request, { name: "g1", parameters: { pool: "rbd" }, secrets: logged(SECRETS), volumeIds: ["v1"] });
    const modified = await fx.up.modifyGroup({ ...named, volumeGroupId: "group-g1", volumeIds: ["v1", "v2"], parameters: { pool: "rbd" } });
    assert.ok(modified.ok, JSON.stringify(modified));
    assert.deepEqual(modified.value.volumeGroup?.volumeIds, ["v1", "v2"]);
    const [m] = fx.driverCalls("/volumegroup.Controller/ModifyVolumeGroupMembership");
    assert.deepEqual(m!.request, { volumeGroupId: "group-g1", volumeIds: ["v1", "v2"], secrets: logged(SECRETS), parameters: { pool: "rbd" } });
    const got = await fx.up.getGroup({ ...named, volumeGroupId: "group-g1" });
    assert.ok(got.ok, JSON.stringify(got));
    assert.deepEqual(got.value.volumeGroup, { volumeGroupId: "group-g1", volumeGroupContext: {}, volumeIds: ["v1", "v2"] });
    assert.equal(code(await fx.up.deleteGroup({ ...named, volumeGroupId: "group-g1" })), "OK");
    const [d] = fx.driverCalls("/volumegroup.Controller/DeleteVolumeGroup");
    assert.deepEqual(d!.request, { volumeGroupId: "group-g1", secrets: logged(SECRETS) });
    assert.equal(code(await fx.up.getGroup({ ...named, volumeGroupId: "group-g1" })), "NOT_FOUND", "the driver's NOT_FOUND passes through");
    assert.equal(code(await fx.up.deleteGroup({ ...named, volumeGroupId: "" })), "INVALID_ARGUMENT", "the driver's refusal of a delete passes through");
  });

  test("volume groups of 1000 volumes (requests over 64 KiB) reach the driver; only one over 4 MiB, upstream's limit, is refused", async () => {
    const ids = (n: number, tag: string) =>
      Array.from({ length: n }, (_, i) => `0001-0009-rook-ceph-0000000000000002-${tag}-${String(i).padStart(8, "0")}-4a4a-9d9d-5f0c7c1e`);
    const thousand = ids(1000, "a");
    const created = await fx.up.createGroup({ ...named, name: "g-big", parameters: { pool: "rbd" }, volumeIds: thousand });
    assert.ok(created.ok, JSON.stringify(created).slice(0, 300));
    assert.deepEqual(created.value.volumeGroup?.volumeIds, thousand);
    const [c] = fx.driverCalls("/volumegroup.Controller/CreateVolumeGroup").filter((x) => x.request.name === "g-big");
    assert.deepEqual(c?.request.volumeIds, thousand, "every id reached the driver");
    const more = [...thousand, ...ids(200, "b")];
    const modified = await fx.up.modifyGroup({ ...named, volumeGroupId: "group-g-big", volumeIds: more });
    assert.ok(modified.ok, JSON.stringify(modified).slice(0, 300));
    assert.deepEqual(fx.driverCalls("/volumegroup.Controller/ModifyVolumeGroupMembership").at(-1)?.request.volumeIds, more);

    const before = fx.stub.calls({ server: "addons" }).length;
    const huge = await fx.up.createGroup({ ...named, name: "g-huge", volumeIds: ids(70_000, "c") });
    assert.equal(code(huge), "RESOURCE_EXHAUSTED");
    assert.equal(fx.stub.calls({ server: "addons" }).length, before);
    assert.equal(code(await fx.up.deleteGroup({ ...named, volumeGroupId: "group-g-big" })), "OK");
  });

  test("volume groups: a missing Secret is INTERNAL (as upstream) and the driver is not called", async () => {
    const before = fx.stub.calls({ server: "addons" }).length;
    assert.equal(code(await fx.up.createGroup({ ...missing, name: "g2" })), "INTERNAL");
    assert.equal(code(await fx.up.deleteGroup({ ...missing, volumeGroupId: "group-g2" })), "INTERNAL");
    assert.equal(fx.stub.calls({ server: "addons" }).length, before);
  });

  test("a service the driver does not offer answers UNIMPLEMENTED without calling the driver", async () => {
    const before = fx.stub.calls({ server: "addons" }).length;
    for (const r of [await fx.up.controllerReclaimSpace("pv-file"), await fx.up.nodeReclaimSpace("pv-file")]) {
      assert.equal(code(r), "UNIMPLEMENTED");
      assert.match((r as { details: string }).details, /does not offer the ReclaimSpace (OFFLINE|ONLINE) capability/);
    }
    assert.equal(fx.stub.calls({ server: "addons" }).length, before);
  });

  test("no secret value in the sidecar's log; the driver calls are counted", async () => {
    // Its own calls with the named Secret, so it passes run by name too.
    const fence = { ...named, parameters: { clusterID: "c1" }, cidrs: ["10.9.0.0/24"] };
    assert.equal(code(await fx.up.fenceClusterNetwork(fence)), "OK");
    assert.equal(code(await fx.up.unFenceClusterNetwork(fence)), "OK");
    const replicated = { ...named, replicationSource: vol("vol-log"), replicationId: "rid-log", parameters: {} };
    assert.equal(code(await fx.up.enable(replicated)), "OK");
    assert.equal(code(await fx.up.promote({ ...replicated, force: true })), "OK");
    assert.equal(code(await fx.up.disable(replicated)), "OK");
    assert.equal(code(await fx.up.createGroup({ ...named, name: "g-log", parameters: {}, volumeIds: [] })), "OK");
    assert.equal(code(await fx.up.deleteGroup({ ...named, volumeGroupId: "group-g-log" })), "OK");
    await waitFor("the log line of the FenceClusterNetwork call", () =>
      fx.sidecar.logLines().some((l) => l["method"] === "/proto.NetworkFence/FenceClusterNetwork" && l["secret"] === `${OPS_NS}/ceph-secret`),
    );
    const out = fx.sidecar.proc.stdout() + fx.sidecar.proc.stderr();
    assert.ok(!out.includes(SECRET_VALUE), "secret value in the sidecar log");
    const metrics = await fx.sidecar.metrics();
    for (const method of ["/fence.FenceController/FenceClusterNetwork", "/replication.Controller/PromoteVolume", "/volumegroup.Controller/CreateVolumeGroup"]) {
      assert.match(metrics, new RegExp(`csi_sidecar_operations_seconds_count\\{[^}]*method_name="${method}"[^}]*grpc_status_code="OK"`), method);
    }
  });
});

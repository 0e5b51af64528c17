// The csi-addons spec services of the driver-stub (reclaimspace, encryptionkeyrotation, fence,
// replication, volumegroup) over its real addons socket: capabilities from the state file, state
// written back to it, every call in the call log with secrets redacted.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { VolumeCapability_AccessMode_Mode as Mode } from "../../../proto/gen/csi/v1/csi.js";
import {
  Capability_EncryptionKeyRotation_Type as KeyRotation,
  Capability_NetworkFence_Type as Fence,
  Capability_ReclaimSpace_Type as Reclaim,
  Capability_Service_Type as Service,
  Capability_VolumeGroup_Type as Group,
  Capability_VolumeHealer_Type as Healer,
  Capability_VolumeReplication_Type as Replication,
} from "../../../proto/gen/identity/identity.js";
import { GetVolumeReplicationInfoResponse_Status as ReplicationStatus } from "../../../proto/gen/replication/replication.js";
import { redactSecrets, secretDigest } from "../../../driver-stub/call-log.js";
import { parseState, StateFormatError } from "../../../driver-stub/state.js";
import { addonsClients } from "../../support/addons-clients.js";
import { grpcError, STAGING_PATH, status, withStub } from "../../support/driver-stub-fixture.js";
import { waitFor } from "../../support/wait.js";
import { NodeHealVolumeResponse_Result as Result } from "../../../proto/gen/healer/v1/healer.js";

const ALL_ON = {
  reclaimSpaceOffline: true,
  reclaimSpaceOnline: true,
  encryptionKeyRotation: true,
  networkFence: true,
  getClientsToFence: true,
  volumeReplication: true,
  replicationDestinationInfo: true,
  volumeGroup: true,
};
const SECRETS = { userID: "admin", userKey: "AQD-key-never-logged" };
/** What the call log shows for SECRETS: computed by the log's own redaction, whatever it records. */
const LOGGED_SECRETS = (redactSecrets({ secrets: SECRETS }) as { secrets: Record<string, string> }).secrets;
const vol = (volumeId: string) => ({ type: { $case: "volume" as const, volume: { volumeId } } });
const group = (volumeGroupId: string) => ({ type: { $case: "volumegroup" as const, volumegroup: { volumeGroupId } } });

describe("driver-stub csi-addons spec services", () => {
  const fx = withStub();
  let a: ReturnType<typeof addonsClients>;
  before(() => (a = addonsClients(fx.stub)));
  after(() => a?.close());

  it("GetCapabilities offers each service only when the state file turns it on (default: off)", async () => {
    fx.stub.setState({});
    const entry = (type: object) => ({ type });
    const base = [entry({ $case: "service", service: { type: Service.NODE_SERVICE } })];
    const healer = [Healer.GET_VOLUME_HEALTH, Healer.HEAL_VOLUME].map((type) => entry({ $case: "volumeHealer", volumeHealer: { type } }));
    assert.deepEqual((await fx.c.getCapabilities()).capabilities, [...base, ...healer]);
    fx.stub.setState({ capabilities: { reclaimSpaceOnline: true, getVolumeHealth: false, healVolume: false } });
    assert.deepEqual((await fx.c.getCapabilities()).capabilities, [...base, entry({ $case: "reclaimSpace", reclaimSpace: { type: Reclaim.ONLINE } })]);
    fx.stub.setState({ capabilities: ALL_ON });
    assert.deepEqual((await fx.c.getCapabilities()).capabilities, [
      ...base,
      ...healer,
      entry({ $case: "reclaimSpace", reclaimSpace: { type: Reclaim.OFFLINE } }),
      entry({ $case: "reclaimSpace", reclaimSpace: { type: Reclaim.ONLINE } }),
      entry({ $case: "encryptionKeyRotation", encryptionKeyRotation: { type: KeyRotation.ENCRYPTIONKEYROTATION } }),
      entry({ $case: "networkFence", networkFence: { type: Fence.NETWORK_FENCE } }),
      entry({ $case: "networkFence", networkFence: { type: Fence.GET_CLIENTS_TO_FENCE } }),
      entry({ $case: "volumeReplication", volumeReplication: { type: Replication.VOLUME_REPLICATION } }),
      entry({ $case: "volumeReplication", volumeReplication: { type: Replication.GET_REPLICATION_DESTINATION_INFO } }),
      ...[Group.VOLUME_GROUP, Group.MODIFY_VOLUME_GROUP, Group.GET_VOLUME_GROUP, Group.LIST_VOLUME_GROUPS].map((type) =>
        entry({ $case: "volumeGroup", volumeGroup: { type } }),
      ),
    ]);
  });

  it("a service whose capability is off answers UNIMPLEMENTED and changes nothing", async () => {
    fx.stub.setState({ volumes: { v: {} } });
    const calls: [string, () => Promise<unknown>][] = [
      ["ControllerReclaimSpace", () => a.controllerReclaimSpace({ volumeId: "v" })],
      ["NodeReclaimSpace", () => a.nodeReclaimSpace({ volumeId: "v", stagingTargetPath: STAGING_PATH })],
      ["EncryptionKeyRotate", () => a.rotateKey({ volumeId: "v" })],
      ["FenceClusterNetwork", () => a.fence({ cidrs: [{ cidr: "10.0.0.0/24" }] })],
      ["GetFenceClients", () => a.fenceClients({})],
      ["EnableVolumeReplication", () => a.enableReplication({ replicationSource: vol("v") })],
      ["CreateVolumeGroup", () => a.createGroup({ name: "g" })],
    ];
    for (const [method, call] of calls) {
      await assert.rejects(call(), grpcError(status.UNIMPLEMENTED), method);
      assert.equal(fx.stub.calls({ method }).at(-1)?.code, "UNIMPLEMENTED", method);
    }
    assert.deepEqual(fx.stub.readState(), { volumes: { v: {} } });
    // GET_CLIENTS_TO_FENCE and GET_REPLICATION_DESTINATION_INFO are capabilities of their own.
    fx.stub.setState({ capabilities: { networkFence: true, volumeReplication: true }, replication: { "volume:v": { enabled: true } } });
    await assert.rejects(a.fenceClients({}), grpcError(status.UNIMPLEMENTED));
    await assert.rejects(a.destinationInfo({ replicationSource: vol("v") }), grpcError(status.UNIMPLEMENTED));
  });

  it("reclaim space: controller (any volume) and node (staged, under the volume lock) move reclaimable bytes", async () => {
    fx.stub.setState({
      capabilities: ALL_ON,
      volumes: { staged: {}, "staged-unmeasured": {}, busy: { locked: true } },
      space: { cold: { usedBytes: 1000, reclaimableBytes: 400 }, staged: { usedBytes: 50, reclaimableBytes: 20, reclaimedBytes: 5 } },
    });
    assert.deepEqual(await a.controllerReclaimSpace({ volumeId: "cold", parameters: { pool: "rbd" }, secrets: SECRETS }), {
      preUsage: { usageBytes: 1000 },
      postUsage: { usageBytes: 600 },
    });
    const capability = { accessType: { $case: "block" as const, block: {} }, accessMode: { mode: Mode.SINGLE_NODE_WRITER } };
    assert.deepEqual(await a.nodeReclaimSpace({ volumeId: "staged", stagingTargetPath: STAGING_PATH, volumeCapability: capability, secrets: SECRETS }), {
      preUsage: { usageBytes: 50 },
      postUsage: { usageBytes: 30 },
    });
    assert.deepEqual(fx.stub.readState().space, {
      cold: { usedBytes: 600, reclaimableBytes: 0, reclaimedBytes: 400 },
      staged: { usedBytes: 30, reclaimableBytes: 0, reclaimedBytes: 25 },
    });
    // A volume without a space record is trimmed but not measured: no usage, as ceph-csi answers.
    assert.deepEqual(await a.controllerReclaimSpace({ volumeId: "unmeasured", secrets: SECRETS }), { preUsage: undefined, postUsage: undefined });
    assert.deepEqual(
      await a.nodeReclaimSpace({ volumeId: "staged-unmeasured", stagingTargetPath: STAGING_PATH, volumeCapability: capability, secrets: SECRETS }),
      {
        preUsage: undefined,
        postUsage: undefined,
      },
    );
    assert.equal(fx.stub.readState().space?.["unmeasured"], undefined, "no record made up");
    await assert.rejects(a.nodeReclaimSpace({ volumeId: "gone", stagingTargetPath: STAGING_PATH }), grpcError(status.NOT_FOUND));
    await assert.rejects(a.nodeReclaimSpace({ volumeId: "busy", stagingTargetPath: STAGING_PATH }), grpcError(status.ABORTED));
    await assert.rejects(a.nodeReclaimSpace({ volumeId: "staged" }), grpcError(status.INVALID_ARGUMENT));
    await assert.rejects(a.controllerReclaimSpace({}), grpcError(status.INVALID_ARGUMENT));
    // A record without usedBytes has none in use; all of it reclaimable leaves 0, not less.
    fx.stub.updateState(
      (s) => void (s.space = { ...s.space, partial: { reclaimableBytes: 7 }, full: { usedBytes: 9, reclaimableBytes: 9 }, used: { usedBytes: 4 } }),
    );
    assert.deepEqual(
      await a.controllerReclaimSpace({ volumeId: "used" }),
      { preUsage: { usageBytes: 4 }, postUsage: { usageBytes: 4 } },
      "nothing reclaimable",
    );
    assert.deepEqual(await a.controllerReclaimSpace({ volumeId: "partial" }), { preUsage: { usageBytes: 0 }, postUsage: { usageBytes: 0 } });
    assert.deepEqual(await a.controllerReclaimSpace({ volumeId: "full" }), { preUsage: { usageBytes: 9 }, postUsage: { usageBytes: 0 } });
    assert.deepEqual(fx.stub.readState().space?.["full"], { usedBytes: 0, reclaimableBytes: 0, reclaimedBytes: 9 });
    const logged = fx.stub.calls({ method: "NodeReclaimSpace", volumeId: "staged" })[0]!;
    assert.deepEqual(logged.request, {
      volumeId: "staged",
      stagingTargetPath: STAGING_PATH,
      volumeCapability: { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
      secrets: LOGGED_SECRETS,
    });
  });

  it("a node reclaim takes its volume's delayMs holding the volume's lock: a heal meanwhile is ABORTED, one after it is served", async () => {
    fx.stub.setState({ capabilities: ALL_ON, volumes: { v: { state: "ABNORMAL", delayMs: 1_500 } }, space: { v: { usedBytes: 2, reclaimableBytes: 1 } } });
    const seen = fx.stub.proc.stdout().length;
    const reclaiming = a.nodeReclaimSpace({ volumeId: "v", stagingTargetPath: STAGING_PATH });
    await waitFor("the reclaim received", () => fx.stub.proc.stdout().slice(seen).includes("recv /reclaimspace.ReclaimSpaceNode/NodeReclaimSpace v\n"));
    await assert.rejects(fx.c.heal({ volumeId: "v", stagingTargetPath: STAGING_PATH }), grpcError(status.ABORTED));
    assert.deepEqual(await reclaiming, { preUsage: { usageBytes: 2 }, postUsage: { usageBytes: 1 } });
    const logged = fx.stub.calls({ method: "NodeReclaimSpace", volumeId: "v" }).at(-1);
    assert.ok(logged!.t1 - logged!.t0 >= 1_500, `answered after ${logged!.t1 - logged!.t0} ms`);
    assert.equal((await fx.c.heal({ volumeId: "v", stagingTargetPath: STAGING_PATH })).result, Result.HEALED, "the lock is released");
  });

  it("key rotation counts per volume; encryption_key and secrets never reach the call log", async () => {
    fx.stub.setState({ capabilities: ALL_ON });
    await a.rotateKey({ volumeId: "v", encryptionKey: "new-key-material", secrets: SECRETS, parameters: { kms: "vault" } });
    await a.rotateKey({ volumeId: "v" });
    assert.deepEqual(fx.stub.readState().keyRotations, { v: 2 });
    const log = JSON.stringify(fx.stub.calls({ method: "EncryptionKeyRotate" }));
    assert.ok(!log.includes("new-key-material") && !log.includes(SECRETS.userKey), log);
    assert.deepEqual(fx.stub.calls({ method: "EncryptionKeyRotate" }).at(-2)!.request, {
      volumeId: "v",
      encryptionKey: secretDigest("new-key-material"),
      parameters: { kms: "vault" },
      secrets: LOGGED_SECRETS,
    });
  });

  it("fence adds CIDRs once, unfence removes them, list reports them; bad CIDRs are INVALID_ARGUMENT", async () => {
    fx.stub.setState({ capabilities: ALL_ON, fenceClients: [{ id: "cluster-a", addresses: ["10.1.2.3/32"] }] });
    await a.fence({ cidrs: [{ cidr: "10.0.0.0/24" }, { cidr: "fd00::/64" }], secrets: SECRETS });
    await a.fence({ cidrs: [{ cidr: "10.0.0.0/24" }] });
    assert.deepEqual(fx.stub.readState().fenced, ["10.0.0.0/24", "fd00::/64"]);
    assert.deepEqual(await a.listFence({}), { cidrs: [{ cidr: "10.0.0.0/24" }, { cidr: "fd00::/64" }] });
    await a.unfence({ cidrs: [{ cidr: "10.0.0.0/24" }] });
    assert.deepEqual(fx.stub.readState().fenced, ["fd00::/64"]);
    for (const cidrs of [[], [{ cidr: "10.0.0.0" }], [{ cidr: "10.0.0.0/33" }], [{ cidr: "host/8" }]]) {
      await assert.rejects(a.fence({ cidrs }), grpcError(status.INVALID_ARGUMENT), JSON.stringify(cidrs));
    }
    assert.deepEqual(await a.fenceClients({ parameters: { clusterID: "c" } }), { clients: [{ id: "cluster-a", addresses: [{ cidr: "10.1.2.3/32" }] }] });
  });

  it("replication: enable, promote/demote, resync, info and destination info, per volume or group", async () => {
    fx.stub.setState({ capabilities: ALL_ON, groups: { "group-g": { name: "g", volumeIds: ["v1", "v2"] } } });
    await assert.rejects(a.promote({ replicationSource: vol("v") }), grpcError(status.FAILED_PRECONDITION), "not enabled yet");
    await assert.rejects(a.enableReplication({}), grpcError(status.INVALID_ARGUMENT));
    await a.enableReplication({ replicationSource: vol("v"), parameters: { mode: "snapshot" }, secrets: SECRETS });
    await a.demote({ volumeId: "v", force: true }); // the deprecated volume_id names the same source
    assert.deepEqual(await a.resync({ replicationSource: vol("v") }), { ready: true });
    const v = fx.stub.readState().replication?.["volume:v"];
    assert.equal(v?.enabled, true);
    assert.equal(v?.role, "secondary");
    assert.equal(v?.resyncs, 1);
    const info = await a.replicationInfo({ replicationSource: vol("v") });
    assert.equal(info.status, ReplicationStatus.HEALTHY);
    assert.equal(info.lastSyncTime?.toISOString(), v?.lastSyncTime);
    assert.equal(info.lastSyncBytes, 0, "the stub moves no data");
    assert.deepEqual(await a.destinationInfo({ replicationSource: vol("v") }), {
      replicationDestination: { type: { $case: "volume", volume: { volumeId: "v" } } },
    });
    await a.enableReplication({ replicationSource: group("group-g") });
    fx.stub.updateState((s) => void (s.replication!["volumegroup:group-g"]!.destination = "remote-g"));
    assert.deepEqual(await a.destinationInfo({ replicationSource: group("group-g") }), {
      replicationDestination: { type: { $case: "volumegroup", volumegroup: { volumeGroupId: "remote-g", volumeIds: { v1: "v1", v2: "v2" } } } },
    });
    await a.disableReplication({ replicationSource: vol("v") });
    await assert.rejects(a.replicationInfo({ replicationSource: vol("v") }), grpcError(status.FAILED_PRECONDITION));
  });

  it("volume groups: create (idempotent by name), modify, get, list, delete (idempotent); unknown → NOT_FOUND", async () => {
    fx.stub.setState({ capabilities: ALL_ON });
    const created = await a.createGroup({ name: "g", volumeIds: ["v1"], secrets: SECRETS });
    assert.deepEqual(created.volumeGroup, {
      volumeGroupId: "group-g",
      volumeGroupContext: {},
      volumes: [{ capacityBytes: 0, volumeId: "v1", volumeContext: {} }],
    });
    assert.deepEqual(await a.createGroup({ name: "g", volumeIds: ["other"] }), created, "same name, same group");
    const modified = await a.modifyGroup({ volumeGroupId: "group-g", volumeIds: ["v1", "v2"] });
    assert.deepEqual(
      modified.volumeGroup?.volumes.map((m) => m.volumeId),
      ["v1", "v2"],
    );
    assert.deepEqual(await a.getGroup({ volumeGroupId: "group-g" }), modified);
    assert.deepEqual(
      (await a.listGroups({})).entries.map((e) => e.volumeGroup?.volumeGroupId),
      ["group-g"],
    );
    assert.deepEqual(fx.stub.readState().groups, { "group-g": { name: "g", volumeIds: ["v1", "v2"], context: {} } });
    await a.deleteGroup({ volumeGroupId: "group-g" });
    await a.deleteGroup({ volumeGroupId: "group-g" });
    assert.deepEqual(fx.stub.readState().groups, {});
    await assert.rejects(a.getGroup({ volumeGroupId: "group-g" }), grpcError(status.NOT_FOUND));
    await assert.rejects(a.modifyGroup({ volumeGroupId: "nope" }), grpcError(status.NOT_FOUND));
    await assert.rejects(a.createGroup({}), grpcError(status.INVALID_ARGUMENT));
  });

  it("a driver that is not ready answers FAILED_PRECONDITION", async () => {
    fx.stub.setState({ ready: false, capabilities: ALL_ON });
    await assert.rejects(a.fence({ cidrs: [{ cidr: "10.0.0.0/24" }] }), grpcError(status.FAILED_PRECONDITION));
    await assert.rejects(a.controllerReclaimSpace({ volumeId: "v" }), grpcError(status.FAILED_PRECONDITION));
  });
});

describe("driver-stub state file: the csi-addons spec services' part", () => {
  it("is validated strictly, naming the offending path", () => {
    for (const [text, why] of [
      ['{"space": {"v": {"usedBytes": -1}}}', /state\.space\["v"\]\.usedBytes: expected a byte count/],
      ['{"space": {"v": {"used": 1}}}', /state\.space\["v"\]: unknown key "used"/],
      ['{"fenced": "10.0.0.0/8"}', /state\.fenced: expected an array/],
      ['{"fenceClients": [{"id": "a", "cidrs": []}]}', /state\.fenceClients\[0\]: unknown key "cidrs"/],
      ['{"replication": {"volume:v": {"role": "leader"}}}', /role: expected primary\|secondary/],
      ['{"groups": {"g": {"volumeIds": "v1"}}}', /volumeIds: expected an array of strings/],
      ['{"capabilities": {"fence": true}}', /state\.capabilities: unknown key "fence"/],
    ] as const) {
      assert.throws(
        () => parseState(text),
        (err: Error) => err instanceof StateFormatError && why.test(err.message),
        text,
      );
    }
  });
});

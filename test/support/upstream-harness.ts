// For the upstream-service tests: the in-memory API, the driver-stub and the sidecar (auth off) as
// real processes, and clients built from our copy of the upstream protos (package `proto`), the
// way the upstream csi-addons controller calls a sidecar.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as ekr from "../../proto/gen/proto/encryptionkeyrotation.js";
import * as fence from "../../proto/gen/proto/networkfence.js";
import * as reclaim from "../../proto/gen/proto/reclaimspace.js";
import * as replication from "../../proto/gen/proto/replication.js";
import * as vg from "../../proto/gen/proto/volumegroup.js";
import { redactSecrets } from "../../driver-stub/call-log.js";
import { loadRbacRules, type RbacRules } from "./deploy/rbac.js";
import type { KubeApi } from "../kube/index.js";
import { startTestKube } from "./cluster.js";
import { startDriverStub, type DriverStub, type StubState } from "./driver-stub.js";
import { call, rawUnary } from "./grpc.js";
import { tempDir } from "./proc.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "./sidecar.js";
import { sidecarAccount } from "./upstream-controller.js";

/** What the stub's call log shows for these secrets: computed by the log's own redaction. */
export function logged(secrets: Record<string, string>): Record<string, string> {
  return (redactSecrets({ secrets }) as { secrets: Record<string, string> }).secrets;
}

function clients(address: string) {
  const insecure = grpc.credentials.createInsecure();
  const made = {
    reclaim: new reclaim.ReclaimSpaceClient(address, insecure),
    keys: new ekr.EncryptionKeyRotationClient(address, insecure),
    fence: new fence.NetworkFenceClient(address, insecure),
    replication: new replication.ReplicationClient(address, insecure),
    groups: new vg.VolumeGroupControllerClient(address, insecure),
  };
  const { reclaim: r, keys: k, fence: f, replication: p, groups: g } = made;
  return {
    controllerReclaimSpace: (pvName: string) => call(r, r.controllerReclaimSpace, { pvName }),
    nodeReclaimSpace: (pvName: string, deadlineMs?: number) => call(r, r.nodeReclaimSpace, { pvName }, { deadlineMs }),
    encryptionKeyRotate: (pvName: string) => call(k, k.encryptionKeyRotate, { pvName }),
    fenceClusterNetwork: (req: Partial<fence.NetworkFenceRequest>, deadlineMs?: number) =>
      call(f, f.fenceClusterNetwork, fence.NetworkFenceRequest.fromPartial(req), { deadlineMs }),
    unFenceClusterNetwork: (req: Partial<fence.NetworkFenceRequest>) => call(f, f.unFenceClusterNetwork, fence.NetworkFenceRequest.fromPartial(req)),
    getFenceClients: (req: Partial<fence.FenceClientsRequest>) => call(f, f.getFenceClients, fence.FenceClientsRequest.fromPartial(req)),
    enable: (req: replication.DeepPartial<replication.EnableVolumeReplicationRequest>) =>
      call(p, p.enableVolumeReplication, replication.EnableVolumeReplicationRequest.fromPartial(req)),
    disable: (req: replication.DeepPartial<replication.DisableVolumeReplicationRequest>) =>
      call(p, p.disableVolumeReplication, replication.DisableVolumeReplicationRequest.fromPartial(req)),
    promote: (req: replication.DeepPartial<replication.PromoteVolumeRequest>) => call(p, p.promoteVolume, replication.PromoteVolumeRequest.fromPartial(req)),
    demote: (req: replication.DeepPartial<replication.DemoteVolumeRequest>) => call(p, p.demoteVolume, replication.DemoteVolumeRequest.fromPartial(req)),
    resync: (req: replication.DeepPartial<replication.ResyncVolumeRequest>) => call(p, p.resyncVolume, replication.ResyncVolumeRequest.fromPartial(req)),
    info: (req: replication.DeepPartial<replication.GetVolumeReplicationInfoRequest>) =>
      call(p, p.getVolumeReplicationInfo, replication.GetVolumeReplicationInfoRequest.fromPartial(req)),
    destination: (req: replication.DeepPartial<replication.GetReplicationDestinationInfoRequest>) =>
      call(p, p.getReplicationDestinationInfo, replication.GetReplicationDestinationInfoRequest.fromPartial(req)),
    createGroup: (req: vg.DeepPartial<vg.CreateVolumeGroupRequest>) => call(g, g.createVolumeGroup, vg.CreateVolumeGroupRequest.fromPartial(req)),
    modifyGroup: (req: vg.DeepPartial<vg.ModifyVolumeGroupMembershipRequest>) =>
      call(g, g.modifyVolumeGroupMembership, vg.ModifyVolumeGroupMembershipRequest.fromPartial(req)),
    deleteGroup: (req: vg.DeepPartial<vg.DeleteVolumeGroupRequest>) => call(g, g.deleteVolumeGroup, vg.DeleteVolumeGroupRequest.fromPartial(req)),
    getGroup: (req: vg.DeepPartial<vg.ControllerGetVolumeGroupRequest>) =>
      call(g, g.controllerGetVolumeGroup, vg.ControllerGetVolumeGroupRequest.fromPartial(req)),
    /** Any method with the request's bytes as given: the upstream controller's wire, not our encoder's. */
    raw: (path: string, body: Uint8Array) => rawUnary(p, path, Buffer.from(body)),
    close: () => Object.values(made).forEach((c) => c.close()),
  };
}

export interface UpstreamFixture {
  kube: KubeApi;
  stub: DriverStub;
  sidecar: SidecarProc;
  up: ReturnType<typeof clients>;
  /** Calls of one method on the stub's addons socket. */
  driverCalls(method: string): { request: any; code: string }[];
}

export interface UpstreamFixtureOptions {
  /**
   * Runs the sidecar as its deploy/ ServiceAccount against an API server that enforces RBAC, with
   * these rules (derived from deploy/'s) instead of the admin's everything.
   */
  sidecarRules?: (deployed: RbacRules) => RbacRules;
}

const SIDECAR_TOKEN = "upstream-sidecar-sa-token-3e1f";

/** Starts everything before the file's tests; afterwards checks the CSI socket saw no call and stops all. */
export function upstreamFixture(objects: unknown[], state: StubState, sidecarArgs: string[] = [], opts: UpstreamFixtureOptions = {}): UpstreamFixture {
  const fx = {} as UpstreamFixture;
  before(async () => {
    fx.kube = await startTestKube(objects, { requireRbac: opts.sidecarRules !== undefined });
    let kubeconfig = fx.kube.kubeconfigPath;
    if (opts.sidecarRules) kubeconfig = sidecarAccount(fx.kube, SIDECAR_TOKEN, opts.sidecarRules(loadRbacRules()));
    const dir = tempDir();
    fx.stub = await startDriverStub({ dir, state });
    fx.sidecar = await startSidecarProc({ driverSocket: join(dir, "addons.sock"), kubeconfig, args: sidecarArgs });
    await waitHealth(fx.sidecar, "SERVING");
    fx.up = clients(fx.sidecar.address);
    fx.driverCalls = (method) => fx.stub.calls({ server: "addons", method }) as { request: any; code: string }[];
  });
  after(async () => {
    try {
      // Still never a CSI call: the upstream services use only the CSI-Addons socket.
      assert.deepEqual(fx.stub?.csiCalls(), [], "zero calls on the CSI socket");
    } finally {
      fx.up?.close();
      await fx.sidecar?.stop();
      await fx.stub?.stop();
      await fx.kube?.stop();
    }
  });
  return fx;
}

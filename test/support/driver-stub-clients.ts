// Promise-returning wrappers around the generated grpc-js clients, dialling a stub's real sockets.
import { credentials, Metadata, type CallOptions, type Client, type ClientUnaryCall, type ServiceError } from "@grpc/grpc-js";
import * as csi from "../../proto/gen/csi/v1/csi.js";
import * as healer from "../../proto/gen/healer/v1/healer.js";
import * as identity from "../../proto/gen/identity/identity.js";
import type { DriverStub } from "./driver-stub.js";

// The generated clients' last overload; TypeScript infers from it when handed the overloaded method.
type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (err: ServiceError | null, response: Res) => void,
) => ClientUnaryCall;

export interface Pending<Res> {
  call: ClientUnaryCall;
  response: Promise<Res>;
}

export interface Rpc<Partial, Res> {
  (request?: Partial, deadlineMs?: number): Promise<Res>;
  /** Starts the call and hands back its ClientUnaryCall too, e.g. to cancel() it. */
  start(request?: Partial, deadlineMs?: number): Pending<Res>;
}

export function rpc<Req, Res, P>(client: Client, method: UnaryMethod<Req, Res>, type: { fromPartial(p: P): Req }): Rpc<P, Res> {
  const start = (request = {} as P, deadlineMs = 10_000): Pending<Res> => {
    let call!: ClientUnaryCall;
    const response = new Promise<Res>((resolve, reject) => {
      call = method.call(client, type.fromPartial(request), new Metadata(), { deadline: Date.now() + deadlineMs }, (err, res) =>
        err ? reject(err) : resolve(res),
      );
    });
    return { call, response };
  };
  return Object.assign((request?: P, deadlineMs?: number) => start(request, deadlineMs).response, { start });
}

export function stubClients(stub: Pick<DriverStub, "addonsEndpoint" | "csiEndpoint">) {
  const insecure = credentials.createInsecure();
  const addonsIdentity = new identity.IdentityClient(stub.addonsEndpoint, insecure);
  const volumeHealer = new healer.VolumeHealerNodeClient(stub.addonsEndpoint, insecure);
  const csiIdentity = new csi.IdentityClient(stub.csiEndpoint, insecure);
  const csiNode = new csi.NodeClient(stub.csiEndpoint, insecure);
  return {
    getIdentity: rpc(addonsIdentity, addonsIdentity.getIdentity, identity.GetIdentityRequest),
    getCapabilities: rpc(addonsIdentity, addonsIdentity.getCapabilities, identity.GetCapabilitiesRequest),
    probe: rpc(addonsIdentity, addonsIdentity.probe, identity.ProbeRequest),
    health: rpc(volumeHealer, volumeHealer.nodeGetVolumeHealth, healer.NodeGetVolumeHealthRequest),
    // A request that names no reason is sent as VOLUME_ABNORMAL (heal only what is broken), the
    // reason the stub's older cases were written for; a test of the reason itself names it.
    heal: rpc(volumeHealer, volumeHealer.nodeHealVolume, {
      fromPartial: (p: healer.DeepPartial<healer.NodeHealVolumeRequest>) =>
        healer.NodeHealVolumeRequest.fromPartial("reason" in p ? p : { ...p, reason: healer.HealReason.VOLUME_ABNORMAL }),
    }),
    getPluginInfo: rpc(csiIdentity, csiIdentity.getPluginInfo, csi.GetPluginInfoRequest),
    getPluginCapabilities: rpc(csiIdentity, csiIdentity.getPluginCapabilities, csi.GetPluginCapabilitiesRequest),
    csiProbe: rpc(csiIdentity, csiIdentity.probe, csi.ProbeRequest),
    stage: rpc(csiNode, csiNode.nodeStageVolume, csi.NodeStageVolumeRequest),
    unstage: rpc(csiNode, csiNode.nodeUnstageVolume, csi.NodeUnstageVolumeRequest),
    nodeGetCapabilities: rpc(csiNode, csiNode.nodeGetCapabilities, csi.NodeGetCapabilitiesRequest),
    nodeGetInfo: rpc(csiNode, csiNode.nodeGetInfo, csi.NodeGetInfoRequest),
    close() {
      for (const c of [addonsIdentity, volumeHealer, csiIdentity, csiNode]) c.close();
    },
  };
}

export type StubClients = ReturnType<typeof stubClients>;

// Assembles the stub: state, locks and call log shared by two gRPC servers, one per socket.
import { randomUUID } from "node:crypto";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import { IdentityService as CsiIdentityService, NodeService } from "../proto/gen/csi/v1/csi.js";
import { VolumeHealerNodeService } from "../proto/gen/healer/v1/healer.js";
import { IdentityService } from "../proto/gen/identity/identity.js";
import { EncryptionKeyRotationControllerService } from "../proto/gen/encryptionkeyrotation/encryptionkeyrotation.js";
import { FenceControllerService } from "../proto/gen/fence/fence.js";
import { ReclaimSpaceControllerService, ReclaimSpaceNodeService } from "../proto/gen/reclaimspace/reclaimspace.js";
import { ControllerService as ReplicationControllerService } from "../proto/gen/replication/replication.js";
import { ControllerService as VolumeGroupControllerService } from "../proto/gen/volumegroup/volumegroup.js";
import { CallLog } from "./call-log.js";
import type { StubConfig } from "./cli.js";
import { csiIdentityServer, csiNodeServer } from "./csi.js";
import { encryptionKeyRotationServer } from "./encryptionkeyrotation.js";
import { fenceServer } from "./fence.js";
import { reclaimSpaceControllerServer, reclaimSpaceNodeServer } from "./reclaimspace.js";
import { replicationServer } from "./replication.js";
import { volumeGroupServer } from "./volumegroup.js";
import type { Driver } from "./driver.js";
import { healerServer } from "./healer.js";
import { identityServer } from "./identity.js";
import { VolumeLocks } from "./locks.js";
import { prepareSocket, removeSocket } from "./sockets.js";
import { StateStore } from "./state-store.js";
import { packageVersion } from "./version.js";

export interface RunningStub {
  bootId: string;
  /** Stops accepting, lets in-flight calls finish for up to graceMs, then cuts them off. */
  stop(graceMs?: number): Promise<void>;
}

export interface Output {
  say: (line: string) => void;
  warn: (line: string) => void;
}

async function bind(server: Server, socket: string): Promise<void> {
  await prepareSocket(socket);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
  );
}

function shutdown(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(() => server.forceShutdown(), graceMs);
    server.tryShutdown(() => {
      clearTimeout(force);
      resolve();
    });
  });
}

export async function startStub(config: StubConfig, out: Output): Promise<RunningStub> {
  const store = new StateStore(config.stateFile, out.warn);
  const log = new CallLog(config.callLogFile);
  const driver: Driver = {
    info: { name: config.name, vendorVersion: packageVersion(), bootId: randomUUID(), hideBootId: config.noBootId },
    store,
    locks: new VolumeLocks(),
    staleTargets: new Set(),
  };
  const addons = new Server();
  const written = () => store.written();
  const addonsEnv = { server: "addons" as const, log, say: out.say, written };
  addons.addService(IdentityService, identityServer(driver, addonsEnv));
  addons.addService(VolumeHealerNodeService, healerServer(driver, addonsEnv));
  // The upstream CSI-Addons services, answering UNIMPLEMENTED while their capability is off.
  addons.addService(ReclaimSpaceControllerService, reclaimSpaceControllerServer(driver, addonsEnv));
  addons.addService(ReclaimSpaceNodeService, reclaimSpaceNodeServer(driver, addonsEnv));
  addons.addService(EncryptionKeyRotationControllerService, encryptionKeyRotationServer(driver, addonsEnv));
  addons.addService(FenceControllerService, fenceServer(driver, addonsEnv));
  addons.addService(ReplicationControllerService, replicationServer(driver, addonsEnv));
  addons.addService(VolumeGroupControllerService, volumeGroupServer(driver, addonsEnv));
  const csi = new Server();
  const csiEnv = { server: "csi" as const, log, say: out.say, written };
  csi.addService(CsiIdentityService, csiIdentityServer(driver, csiEnv));
  csi.addService(NodeService, csiNodeServer(driver, csiEnv));

  // Only sockets this process bound are removed: a failed bind may mean another server owns one.
  const bound: string[] = [];
  const release = () => {
    for (const socket of bound) removeSocket(socket);
    store.close();
    log.close();
  };
  try {
    for (const [server, socket] of [
      [addons, config.addonsSocket],
      [csi, config.csiSocket],
    ] as const) {
      await bind(server, socket);
      bound.push(socket);
    }
  } catch (err) {
    addons.forceShutdown();
    csi.forceShutdown();
    release();
    throw err;
  }
  return {
    bootId: driver.info.bootId,
    async stop(graceMs = 5_000) {
      await Promise.all([shutdown(addons, graceMs), shutdown(csi, graceMs)]);
      release();
    },
  };
}

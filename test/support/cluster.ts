// The in-memory API as the sidecar tests need it: the upstream CRD registered, the node-plugin
// pod, its DaemonSet, the Node and the namespace seeded, plus whatever a test adds.
import * as grpc from "@grpc/grpc-js";
import { startKubeApi, type KubeApi, type KubeApiOptions } from "../kube/index.js";
import { baseObjects, upstreamCrdFile } from "./fixtures.js";

export function startTestKube(extra: unknown[] = [], opts: Omit<KubeApiOptions, "seed"> & { volumesInUse?: string[] } = {}): Promise<KubeApi> {
  const { volumesInUse, ...rest } = opts;
  return startKubeApi({ crdFiles: [upstreamCrdFile], ...rest, seed: [...baseObjects(volumesInUse), ...extra] });
}

/** A hand-written driver on a unix socket, for replies the driver-stub cannot give. */
export async function serveFakeDriver(socket: string, service: grpc.ServiceDefinition, impl: grpc.UntypedServiceImplementation): Promise<grpc.Server> {
  const server = new grpc.Server();
  server.addService(service, impl);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
  );
  return server;
}

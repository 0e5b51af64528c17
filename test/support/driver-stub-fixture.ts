// One driver-stub process per describe block, with clients on its sockets, stopped afterwards.
import { after, before } from "node:test";
import { status } from "@grpc/grpc-js";
import { startDriverStub, type DriverStub, type DriverStubOptions } from "./driver-stub.js";
import { stubClients, type StubClients } from "./driver-stub-clients.js";

export interface StubFixture {
  stub: DriverStub;
  c: StubClients;
}

export function withStub(opts: DriverStubOptions = {}): StubFixture {
  const fx = {} as StubFixture;
  before(async () => {
    fx.stub = await startDriverStub(opts);
    fx.c = stubClients(fx.stub);
  });
  after(async () => {
    fx.c?.close();
    if (fx.stub === undefined) return;
    // A stub that died under the tests explains their failures better than any assertion.
    const diedEarly = fx.stub.proc.child.exitCode !== null || fx.stub.proc.child.signalCode !== null;
    await fx.stub.stop();
    if (diedEarly) throw new Error(`driver-stub exited during the tests:\n${fx.stub.proc.stdout()}${fx.stub.proc.stderr()}`);
  });
  return fx;
}

/** For assert.rejects: the gRPC status a call must fail with. */
export function grpcError(code: status): { code: status } {
  return { code };
}

export const STAGING_PATH = "/var/lib/kubelet/plugins/kubernetes.io/csi/stub.csi.example.com/abc/globalmount";

export { status };

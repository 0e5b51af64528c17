// One Node hop through the decided stack and nothing else: grpc-js's Server (the sidecar's server)
// with every message left as bytes, in front of our own HTTP/2 client to the driver's unix socket
// (the sidecar's driver client, common/grpc/h2-unary.ts). winston and prom-client are loaded and
// set up as every sidecar has them, and do nothing per call. No protobuf decoding, Kubernetes,
// auth or per-call logs and metrics: what a sidecar on this stack pays before it does anything a
// sidecar must. Given a limit, calls past it wait in the sidecar's own limiter, as --max-inflight
// makes them (the bench's heal-all burst). The bench runs it beside the sidecar and bare-relay.ts (relays.ts).
//   node <bundle of this file> <driver socket> [max in flight]   prints its port on stdout
import * as http2 from "node:http2";
import * as net from "node:net";
import * as grpc from "@grpc/grpc-js";
import { Registry, collectDefaultMetrics } from "prom-client";
import winston from "winston";
import { h2Unary } from "../../common/grpc/h2-unary.js";
import { Limiter } from "../../sidecar/relay/limiter.js";
import { toStatus } from "../../sidecar/server/status.js";

const [socketPath, limitArg] = process.argv.slice(2);
const maxInflight = limitArg === undefined ? Infinity : Number(limitArg);
if (!socketPath || !(maxInflight > 0)) {
  process.stderr.write("usage: node grpc-js-relay.mjs <driver socket> [max in flight]\n");
  process.exit(2);
}
// Its stdout carries the port; the log goes to stderr, and only failures are logged.
const log = winston.createLogger({ format: winston.format.json(), transports: [new winston.transports.Console({ stderrLevels: ["error", "warn", "info", "debug"] })] });
collectDefaultMetrics({ register: new Registry(), eventLoopMonitoringPrecision: 2 ** 31 - 1 });

const driver = http2.connect("http://localhost", { createConnection: () => net.connect(socketPath) });
driver.on("error", (err) => {
  log.error("driver connection failed", { error: err.message });
  process.exit(1);
});
// The sidecar's own limiter: no queue bound here, the bench sends each burst once.
const limiter = new Limiter(maxInflight, Infinity);
const bytes = (b: Buffer) => b;
/** The driver methods the bench relays, each as a method whose messages stay bytes. */
const PATHS = ["/healer.v1.VolumeHealerNode/NodeGetVolumeHealth", "/healer.v1.VolumeHealerNode/NodeHealVolume"];
const method = (path: string) => ({ path, requestStream: false, responseStream: false, requestSerialize: bytes, requestDeserialize: bytes, responseSerialize: bytes, responseDeserialize: bytes });
const definition: grpc.ServiceDefinition = Object.fromEntries(PATHS.map((p) => [p, method(p)]));
const handlers: grpc.UntypedServiceImplementation = Object.fromEntries(
  PATHS.map((p) => [
    p,
    (call: grpc.ServerUnaryCall<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
      const deadline = call.getDeadline();
      const until = deadline instanceof Date ? deadline.getTime() : deadline === Infinity ? Date.now() + 60_000 : deadline;
      // As the sidecar does: a caller that goes away leaves the queue.
      const cancelled = new AbortController();
      call.once("cancelled", () => cancelled.abort());
      limiter.run(() => h2Unary(driver, definition[p]!, call.request, { deadline: until, signal: cancelled.signal }, () => {}), cancelled.signal).then(
        (answer) => done(null, answer),
        (err: unknown) => done(toStatus(err)),
      );
    },
  ]),
);
const server = new grpc.Server();
server.addService(definition, handlers);
server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    log.error("bind failed", { error: err.message });
    process.exit(1);
  }
  process.stdout.write(`${port}\n`);
});
process.on("SIGTERM", () => process.exit(0));

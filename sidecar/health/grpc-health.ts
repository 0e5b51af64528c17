// grpc.health.v1 from Readiness. Besides the status, Check answers with trailing metadata
// `readiness` (and Watch with initial metadata) saying which condition fails and since when, so
// `grpcurl -v` shows an operator the same words as /readyz.
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { HEALTH_SERVICES, type Readiness } from "./readiness.js";

type Status = "SERVING" | "NOT_SERVING" | "SERVICE_UNKNOWN";

export function addHealthService(server: grpc.Server, readiness: Readiness): void {
  const status = (): Status => (readiness.ready ? "SERVING" : "NOT_SERVING");
  const why = () => {
    const md = new grpc.Metadata();
    // Metadata values must be printable ASCII.
    md.set("readiness", readiness.reason().replace(/[^\x20-\x7e]/g, "?"));
    return md;
  };
  server.addService(healthService as grpc.ServiceDefinition, {
    check(call: grpc.ServerUnaryCall<{ service: string }, { status: Status }>, callback: grpc.sendUnaryData<{ status: Status }>) {
      const name = call.request.service;
      if (!HEALTH_SERVICES.includes(name)) {
        callback({ code: grpc.status.NOT_FOUND, details: `health status unknown for service ${name}` });
        return;
      }
      callback(null, { status: status() }, why());
    },
    watch(call: grpc.ServerWritableStream<{ service: string }, { status: Status }>) {
      if (!HEALTH_SERVICES.includes(call.request.service)) {
        call.write({ status: "SERVICE_UNKNOWN" });
        return;
      }
      const send = () => call.write({ status: status() });
      call.sendMetadata(why());
      readiness.on("change", send);
      call.on("cancelled", () => readiness.off("change", send));
      send();
    },
    list(_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) {
      callback(null, { statuses: Object.fromEntries(HEALTH_SERVICES.map((s) => [s, { status: status() }])) });
    },
  });
}

// grpc.health.v1 from Readiness. Besides the status, Check answers with trailing metadata
// `readiness` (and Watch with initial metadata) saying which condition fails and since when, so
// `grpcurl -v` shows an operator the same words as /readyz.
import * as grpc from "@grpc/grpc-js";
import { HealthCheckResponse_ServingStatus as Status, HealthService, type HealthServer } from "../../proto/gen/grpc/health/v1/health.js";
import { HEALTH_SERVICES, type Readiness } from "./readiness.js";

export function addHealthService(server: grpc.Server, readiness: Readiness): void {
  const status = () => (readiness.ready ? Status.SERVING : Status.NOT_SERVING);
  const why = () => {
    const md = new grpc.Metadata();
    // Metadata values must be printable ASCII.
    md.set("readiness", readiness.reason().replace(/[^\x20-\x7e]/g, "?"));
    return md;
  };
  const handlers: HealthServer = {
    check(call, callback) {
      const name = call.request.service;
      if (!HEALTH_SERVICES.includes(name)) {
        callback({ code: grpc.status.NOT_FOUND, details: `health status unknown for service ${name}` });
        return;
      }
      callback(null, { status: status() }, why());
    },
    watch(call) {
      if (!HEALTH_SERVICES.includes(call.request.service)) {
        call.write({ status: Status.SERVICE_UNKNOWN });
        return;
      }
      const send = () => call.write({ status: status() });
      call.sendMetadata(why());
      readiness.on("change", send);
      call.on("cancelled", () => readiness.off("change", send));
      send();
    },
    list(_call, callback) {
      callback(null, { statuses: Object.fromEntries(HEALTH_SERVICES.map((s) => [s, { status: status() }])) });
    },
  };
  server.addService(HealthService, handlers);
}

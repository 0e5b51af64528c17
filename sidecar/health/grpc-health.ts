// grpc.health.v1 from Readiness. Besides the status, Check answers with trailing metadata
// `readiness` (and Watch with initial metadata) saying which condition fails and since when, so
// `grpcurl -v` shows an operator the same words as /readyz. At shutdown, Watch streams end (see
// Readiness.close).
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
      const known = HEALTH_SERVICES.includes(call.request.service);
      const send = () => call.write({ status: status() });
      const stop = () => {
        readiness.off("change", send);
        readiness.off("closed", end);
      };
      // grpc-js sends the status only after the messages written before it, so the watcher reads
      // NOT_SERVING (or SERVICE_UNKNOWN) first. UNAVAILABLE, as for any call refused while the
      // sidecar drains: a watcher that retries is refused until it finds a new process.
      function end() {
        stop();
        const details = "the sidecar is shutting down";
        call.emit("error", Object.assign(new Error(details), { code: grpc.status.UNAVAILABLE, details, metadata: why() }));
      }
      call.on("cancelled", stop);
      if (!known) {
        call.write({ status: Status.SERVICE_UNKNOWN });
      } else {
        call.sendMetadata(why());
        readiness.on("change", send);
        send();
      }
      // A Watch whose handler runs after the close would otherwise stay open for the whole grace.
      if (readiness.closed) end();
      else readiness.on("closed", end);
    },
    list(_call, callback) {
      callback(null, { statuses: Object.fromEntries(HEALTH_SERVICES.map((s) => [s, { status: status() }])) });
    },
  };
  server.addService(HealthService, handlers);
}

// Client interceptor recording csi_sidecar_operations_seconds for every call to the driver,
// so no call site can forget it.
import * as grpc from "@grpc/grpc-js";
import type { Metrics } from "../metrics/metrics.js";
import { grpcCodeName } from "./unary.js";

export function metricsInterceptor(metrics: Metrics, driverName: () => string): grpc.Interceptor {
  return (options, nextCall) => {
    const started = process.hrtime.bigint();
    const method = options.method_definition.path;
    return new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        next(metadata, {
          onReceiveStatus(status, nextStatus) {
            const seconds = Number(process.hrtime.bigint() - started) / 1e9;
            metrics.observeOperation(driverName(), method, grpcCodeName(status.code), seconds);
            nextStatus(status);
          },
        });
      },
    });
  };
}

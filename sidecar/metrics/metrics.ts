// Prometheus metrics, named and bucketed like kubernetes-csi/csi-lib-utils so existing dashboards
// for Go sidecars work unchanged.
import { Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** csi-lib-utils' DefaultOperationsBuckets (seconds). */
export const OPERATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600];

export interface Metrics {
  readonly registry: Registry;
  /** Records one driver call. */
  observeOperation(driverName: string, method: string, grpcCode: string, seconds: number): void;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  // The event-loop-lag monitor samples every 10 ms by default: ~100 wake-ups a second on an idle
  // node (relay-profile.md). 100 ms still shows a blocked loop, at a tenth of the wake-ups.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 100 });
  const operations = new Histogram({
    name: "csi_sidecar_operations_seconds",
    help: "Container Storage Interface operation duration with gRPC error code status total",
    labelNames: ["driver_name", "method_name", "grpc_status_code"] as const,
    buckets: OPERATION_BUCKETS,
    registers: [registry],
  });
  return {
    registry,
    observeOperation(driverName, method, grpcCode, seconds) {
      operations.observe({ driver_name: driverName, method_name: method, grpc_status_code: grpcCode }, seconds);
    },
  };
}

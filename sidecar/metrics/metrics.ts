// Prometheus metrics, named and bucketed like kubernetes-csi/csi-lib-utils so existing dashboards
// for Go sidecars work unchanged.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** csi-lib-utils' DefaultOperationsBuckets (seconds). */
export const OPERATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600];

export interface Metrics {
  readonly registry: Registry;
  /** Records one driver call. */
  observeOperation(driverName: string, method: string, grpcCode: string, seconds: number): void;
  /** Counts a connection or call refused before reaching a handler. */
  countRefused(reason: RefusalReason): void;
  /** Counts a creation of our CSIAddonsNode after someone deleted it. */
  countRecreation(): void;
  /** The controller port's certificate: where it comes from and when it expires (none: plaintext). */
  setTlsCertificate(source: TlsCertificateSource, notAfter: Date | undefined): void;
}

export const REFUSAL_REASONS = ["plaintext", "tls_handshake", "unauthenticated", "permission_denied"] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/**
 * prom-client always starts perf_hooks.monitorEventLoopDelay, a timer that wakes the process every
 * `eventLoopMonitoringPrecision` ms (default 10: ~100 wake-ups a second on an idle node). An idle
 * sidecar should sleep, so that timer is given an interval it never reaches and the seven gauges
 * it feeds are dropped; nodejs_eventloop_lag_seconds stays, measured at each scrape (one
 * setImmediate) at no idle cost.
 */
const NEVER_MS = 2 ** 31 - 1;
const LAG_HISTOGRAM_GAUGES = ["min", "max", "mean", "stddev", "p50", "p90", "p99"].map((s) => `nodejs_eventloop_lag_${s}_seconds`);

export type TlsCertificateSource = "files" | "self-signed" | "none";
const TLS_SOURCES: readonly TlsCertificateSource[] = ["files", "self-signed", "none"];

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: NEVER_MS });
  for (const name of LAG_HISTOGRAM_GAUGES) registry.removeSingleMetric(name);
  const operations = new Histogram({
    name: "csi_sidecar_operations_seconds",
    help: "Container Storage Interface operation duration with gRPC error code status total",
    labelNames: ["driver_name", "method_name", "grpc_status_code"] as const,
    buckets: OPERATION_BUCKETS,
    registers: [registry],
  });
  const refused = new Counter({
    name: "csi_addons_sidecar_refused_total",
    help: "Connections and calls refused on the controller port, by reason",
    labelNames: ["reason"] as const,
    registers: [registry],
  });
  // Every reason from the start at 0, so a rate() alert sees the first refusal.
  for (const reason of REFUSAL_REASONS) refused.inc({ reason }, 0);
  const recreations = new Counter({
    name: "csi_addons_sidecar_csiaddonsnode_recreations_total",
    help: "Creations of this sidecar's CSIAddonsNode after it was deleted (the upstream controller deletes it when it cannot connect)",
    registers: [registry],
  });
  // One series per source, 1 for the one in use, so an alert can fire on source="self-signed".
  const tlsSource = new Gauge({
    name: "csi_addons_sidecar_tls_certificate_source",
    help: "1 for where the controller port's TLS certificate comes from: files, self-signed, or none (plaintext)",
    labelNames: ["source"] as const,
    registers: [registry],
  });
  const tlsExpiry = new Gauge({
    name: "csi_addons_sidecar_tls_certificate_expiry_timestamp_seconds",
    help: "Expiry (notAfter) of the controller port's TLS certificate, in seconds since the epoch; no series when plaintext",
    labelNames: ["source"] as const,
    registers: [registry],
  });
  return {
    registry,
    observeOperation(driverName, method, grpcCode, seconds) {
      operations.observe({ driver_name: driverName, method_name: method, grpc_status_code: grpcCode }, seconds);
    },
    countRefused(reason) {
      refused.inc({ reason });
    },
    countRecreation() {
      recreations.inc();
    },
    setTlsCertificate(source, notAfter) {
      for (const s of TLS_SOURCES) tlsSource.set({ source: s }, s === source ? 1 : 0);
      tlsExpiry.reset();
      if (notAfter) tlsExpiry.set({ source }, notAfter.getTime() / 1000);
    },
  };
}

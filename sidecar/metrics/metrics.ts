// Prometheus metrics, named and bucketed like kubernetes-csi/csi-lib-utils so existing dashboards
// for Go sidecars work unchanged.
import { Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** csi-lib-utils' DefaultOperationsBuckets (seconds). */
export const OPERATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600];

export interface Metrics {
  readonly registry: Registry;
  /** Records one driver call. */
  observeOperation(driverName: string, method: string, grpcCode: string, seconds: number): void;
  /** The controller port's certificate: where it comes from and when it expires (none: plaintext). */
  setTlsCertificate(source: TlsCertificateSource, notAfter: Date | undefined): void;
}

export type TlsCertificateSource = "files" | "self-signed" | "none";
const TLS_SOURCES: readonly TlsCertificateSource[] = ["files", "self-signed", "none"];

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const operations = new Histogram({
    name: "csi_sidecar_operations_seconds",
    help: "Container Storage Interface operation duration with gRPC error code status total",
    labelNames: ["driver_name", "method_name", "grpc_status_code"] as const,
    buckets: OPERATION_BUCKETS,
    registers: [registry],
  });
  // One series per source, 1 for the one in use, so an alert can fire on source="self-signed".
  const tlsSource = new Gauge({
    name: "csi_addons_healer_tls_certificate_source",
    help: "1 for where the controller port's TLS certificate comes from: files, self-signed, or none (plaintext)",
    labelNames: ["source"] as const,
    registers: [registry],
  });
  const tlsExpiry = new Gauge({
    name: "csi_addons_healer_tls_certificate_expiry_timestamp_seconds",
    help: "Expiry (notAfter) of the controller port's TLS certificate, in seconds since the epoch; no series when plaintext",
    labelNames: ["source"] as const,
    registers: [registry],
  });
  return {
    registry,
    observeOperation(driverName, method, grpcCode, seconds) {
      operations.observe({ driver_name: driverName, method_name: method, grpc_status_code: grpcCode }, seconds);
    },
    setTlsCertificate(source, notAfter) {
      for (const s of TLS_SOURCES) tlsSource.set({ source: s }, s === source ? 1 : 0);
      tlsExpiry.reset();
      if (notAfter) tlsExpiry.set({ source }, notAfter.getTime() / 1000);
    },
  };
}

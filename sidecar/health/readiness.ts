// SERVING only while the driver is connected and ready, the CSIAddonsNode is in place, and we
// are not shutting down. Drives grpc.health.v1 and /readyz from one place.
import { HealthImplementation } from "grpc-health-check";
import type { Logger } from "../log/logger.js";

export const HEALTH_SERVICES = ["", "sidecar.v1.VolumeHealer", "identity.Identity"];

export class Readiness {
  readonly health = new HealthImplementation(Object.fromEntries(HEALTH_SERVICES.map((s) => [s, "NOT_SERVING" as const])));
  private state = { driver: false, node: false, shuttingDown: false };
  private serving = false;

  constructor(private readonly logger: Logger) {}

  update(change: Partial<{ driver: boolean; node: boolean; shuttingDown: boolean }>): void {
    this.state = { ...this.state, ...change };
    const serving = this.state.driver && this.state.node && !this.state.shuttingDown;
    if (serving === this.serving) return;
    this.serving = serving;
    for (const s of HEALTH_SERVICES) this.health.setStatus(s, serving ? "SERVING" : "NOT_SERVING");
    this.logger.info(serving ? "ready: SERVING" : "not ready: NOT_SERVING", { why: this.reason() });
  }

  get ready(): boolean {
    return this.serving;
  }

  /** Why we are (not) ready, for /readyz and logs. */
  reason(): string {
    if (this.serving) return "driver ready and CSIAddonsNode in place";
    const missing = [];
    if (this.state.shuttingDown) missing.push("shutting down");
    if (!this.state.driver) missing.push("driver not connected or not ready");
    if (!this.state.node) missing.push("CSIAddonsNode not in place");
    return missing.join("; ");
  }
}

// SERVING only while the driver is connected and ready, the CSIAddonsNode is confirmed in place
// (node/presence.ts), and we are not shutting down. Drives grpc.health.v1 and /readyz from one
// place; both say which condition fails and since when.
import { EventEmitter } from "node:events";
import type { Logger } from "../../common/log/logger.js";
import type { Condition } from "../node/presence.js";

export const HEALTH_SERVICES = ["", "sidecar.v1.VolumeHealer", "identity.Identity"];

type Name = "driver" | "node" | "shutdown";

interface Events {
  change: [boolean];
  closed: [];
}

export class Readiness extends EventEmitter<Events> {
  private readonly conditions: Record<Name, Condition>;
  private serving = false;
  private done = false;

  constructor(private readonly logger: Logger) {
    super();
    // One listener per open grpc.health.v1 Watch stream.
    this.setMaxListeners(0);
    const now = new Date();
    this.conditions = {
      driver: { ok: false, reason: "driver not connected yet", since: now },
      node: { ok: false, reason: "CSIAddonsNode not confirmed by the API yet", since: now },
      shutdown: { ok: true, reason: "not shutting down", since: now },
    };
  }

  /** Sets one condition; `since` moves only when the condition flips, unless the caller knows better. */
  set(name: Name, ok: boolean, reason: string, since?: Date): void {
    const prev = this.conditions[name];
    this.conditions[name] = { ok, reason, since: since ?? (prev.ok === ok ? prev.since : new Date()) };
    const serving = Object.values(this.conditions).every((c) => c.ok);
    if (serving === this.serving) return;
    this.serving = serving;
    this.logger.info(serving ? "ready: SERVING" : "not ready: NOT_SERVING", { why: this.reason() });
    this.emit("change", serving);
  }

  /**
   * For good, at shutdown: NOT_SERVING (told to every watcher first), then "closed", on which the
   * health service ends its Watch streams. grpc-js's graceful shutdown waits for every open stream,
   * and a Watch never ends on its own, so one watcher would otherwise hold the drain for the whole
   * grace period.
   */
  close(reason: string): void {
    this.set("shutdown", false, reason);
    if (this.done) return;
    this.done = true;
    this.emit("closed");
  }

  get closed(): boolean {
    return this.done;
  }

  get ready(): boolean {
    return this.serving;
  }

  /** What holds (when ready) or every condition that fails, each with the time it started. */
  reason(): string {
    const all = Object.values(this.conditions);
    if (this.serving)
      return `ready: ${all
        .filter((c) => c !== this.conditions.shutdown)
        .map(describe)
        .join("; ")}`;
    return `not ready: ${all
      .filter((c) => !c.ok)
      .map(describe)
      .join("; ")}`;
  }
}

function describe(c: Condition): string {
  return `${c.reason} (since ${c.since.toISOString()})`;
}

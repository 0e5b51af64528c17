// What the sidecar knows about its CSIAddonsNode, as a readiness condition: in place only while the
// API confirmed it recently (within `boundMs`) and it is not known to be missing. A silent API
// (down, partitioned, restored without our object) must not leave "in place" standing for ever.
import { EventEmitter } from "node:events";

export interface Condition {
  ok: boolean;
  /** Which condition holds or fails, in words for /readyz, gRPC health and logs. */
  reason: string;
  since: Date;
}

type State =
  { kind: "pending" } | { kind: "confirmed"; at: Date } | { kind: "missing"; why: string } | { kind: "unconfirmed"; lastConfirmed: Date | undefined };

interface Events {
  change: [Condition];
}

export class Presence extends EventEmitter<Events> {
  private state: State = { kind: "pending" };
  private since = new Date();
  private lastError: string | undefined;
  private expiry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly name: () => string,
    private readonly boundMs: number,
  ) {
    super();
  }

  get condition(): Condition {
    return { ok: this.state.kind === "confirmed", reason: this.describe(), since: this.since };
  }

  /** The API just showed (or accepted) the object as we want it. */
  confirmed(): void {
    if (this.closed) return;
    this.lastError = undefined;
    const wasOk = this.state.kind === "confirmed";
    this.state = { kind: "confirmed", at: new Date() };
    // One timer for the life of the process, pushed forward by each confirmation (no new timer per read).
    if (this.expiry) this.expiry.refresh();
    else this.expiry = setTimeout(() => this.expire(), this.boundMs).unref();
    if (!wasOk) this.transition();
  }

  /** The object is known to be gone (deleted, being deleted, about to be replaced). */
  missing(why: string): void {
    if (this.state.kind === "missing" && this.state.why === why) return;
    const wasMissing = this.state.kind === "missing";
    this.state = { kind: "missing", why };
    if (wasMissing) this.emit("change", this.condition);
    else this.transition();
  }

  /** An API request failed; readiness lapses only once the bound passes without a confirmation. */
  failed(error: string): void {
    if (error === this.lastError) return;
    this.lastError = error;
    if (this.state.kind !== "confirmed") this.emit("change", this.condition);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.expiry);
  }

  private expire(): void {
    if (this.closed || this.state.kind !== "confirmed") return;
    this.state = { kind: "unconfirmed", lastConfirmed: this.state.at };
    this.transition();
  }

  private transition(): void {
    this.since = new Date();
    this.emit("change", this.condition);
  }

  private describe(): string {
    const obj = `CSIAddonsNode ${this.name()}`;
    const err = this.lastError ? `; last API error: ${this.lastError}` : "";
    switch (this.state.kind) {
      case "confirmed":
        return `${obj} in place, last confirmed by the API at ${this.state.at.toISOString()}`;
      case "pending":
        return `${obj} not confirmed by the API yet${err}`;
      case "missing":
        return `${obj} missing (${this.state.why})${err}`;
      case "unconfirmed": {
        const last = this.state.lastConfirmed?.toISOString() ?? "never";
        return `${obj} not confirmed by the API within ${this.boundMs / 1000}s (last confirmed at ${last})${err}`;
      }
    }
  }
}

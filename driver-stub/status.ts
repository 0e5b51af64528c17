// gRPC status errors raised by the stub's handlers, and the status names the call log uses.
import { status as Status } from "@grpc/grpc-js";

export { Status };

/** A handler failure that must reach the client as this exact gRPC status. */
export class StatusError extends Error {
  constructor(
    readonly code: Status,
    readonly details: string,
  ) {
    super(details);
    this.name = "StatusError";
  }
}

/** Any other thrown value becomes INTERNAL: a real driver never answers UNKNOWN on purpose. */
export function toStatusError(err: unknown): StatusError {
  if (err instanceof StatusError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new StatusError(Status.INTERNAL, `driver-stub internal error: ${message}`);
}

/** "OK", "ABORTED", ...: the name tests and people read in the call log. */
export function statusName(code: Status): string {
  return Status[code] ?? String(code);
}

// Typed domain errors. Handlers and the relay throw these; server/status.ts is the one place that
// turns them into gRPC status codes. Messages name objects (PV, volume handle, secret namespace/name)
// and never carry secret values.
export type ErrorKind =
  | "InvalidArgument"
  | "NotFound"
  | "FailedPrecondition"
  | "Unimplemented"
  | "Unavailable"
  | "ResourceExhausted"
  | "DeadlineExceeded"
  | "Cancelled"
  | "Unauthenticated"
  | "PermissionDenied"
  | "Internal";

export class DomainError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
  ) {
    super(message);
    this.name = `${kind}Error`;
  }
}

export const invalidArgument = (msg: string) => new DomainError("InvalidArgument", msg);
export const notFound = (msg: string) => new DomainError("NotFound", msg);
export const failedPrecondition = (msg: string) => new DomainError("FailedPrecondition", msg);
export const unimplemented = (msg: string) => new DomainError("Unimplemented", msg);
export const unavailable = (msg: string) => new DomainError("Unavailable", msg);
export const resourceExhausted = (msg: string) => new DomainError("ResourceExhausted", msg);
export const deadlineExceeded = (msg: string) => new DomainError("DeadlineExceeded", msg);
export const unauthenticated = (msg: string) => new DomainError("Unauthenticated", msg);
export const permissionDenied = (msg: string) => new DomainError("PermissionDenied", msg);

/** Why a waiter whose `signal` fired gives up: the signal's own DomainError (a deadline), else Cancelled. */
export const cancelledBy = (signal: AbortSignal, msg = "call cancelled") =>
  signal.reason instanceof DomainError ? signal.reason : new DomainError("Cancelled", msg);

// The one mapping from errors to gRPC status. Driver statuses pass through unchanged; domain
// errors map by kind; anything unexpected becomes INTERNAL without leaking its text to the caller.
import * as grpc from "@grpc/grpc-js";
import { DomainError, type ErrorKind } from "../errors.js";
import { KubeError } from "../kube/api.js";
import { isServiceError } from "../driver/unary.js";

const CODES: Record<ErrorKind, grpc.status> = {
  InvalidArgument: grpc.status.INVALID_ARGUMENT,
  NotFound: grpc.status.NOT_FOUND,
  FailedPrecondition: grpc.status.FAILED_PRECONDITION,
  Unimplemented: grpc.status.UNIMPLEMENTED,
  Unavailable: grpc.status.UNAVAILABLE,
  ResourceExhausted: grpc.status.RESOURCE_EXHAUSTED,
  DeadlineExceeded: grpc.status.DEADLINE_EXCEEDED,
  Cancelled: grpc.status.CANCELLED,
  Unauthenticated: grpc.status.UNAUTHENTICATED,
  PermissionDenied: grpc.status.PERMISSION_DENIED,
  Internal: grpc.status.INTERNAL,
};

export interface MappedStatus {
  code: grpc.status;
  details: string;
  /** True when the error was not one we expected (log it in full). */
  unexpected: boolean;
}

export function toStatus(err: unknown): MappedStatus {
  if (err instanceof DomainError) return { code: CODES[err.kind], details: err.message, unexpected: false };
  if (isServiceError(err)) return { code: err.code, details: err.details, unexpected: false };
  if (err instanceof KubeError) {
    const said = `Kubernetes API: ${err.status || "unreachable"} ${err.reason}: ${err.message}`.replace(/\s+/g, " ");
    // Refused by RBAC: the request is sound and the caller's rights are not in question (so neither
    // INVALID_ARGUMENT nor PERMISSION_DENIED), nor is it a sidecar bug (INTERNAL). The deployment
    // lacks a grant and no retry succeeds until an operator adds it, as with a missing stage secret.
    if (err.status === 403)
      return { code: grpc.status.FAILED_PRECONDITION, details: `${said} (the sidecar's ServiceAccount lacks a grant)`, unexpected: false };
    const transient = err.status === 0 || err.status === 429 || err.status >= 500;
    return {
      code: transient ? grpc.status.UNAVAILABLE : grpc.status.INTERNAL,
      details: said,
      unexpected: !transient,
    };
  }
  return { code: grpc.status.INTERNAL, details: "internal error in the sidecar", unexpected: true };
}

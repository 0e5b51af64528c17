// Calls to the driver: raw pass-through methods, and telling its gRPC statuses apart (which the
// sidecar passes on unchanged).
import * as grpc from "@grpc/grpc-js";
import type { MethodDef } from "../../common/grpc/call-error.js";

/** A method definition that moves raw bytes, for transparent pass-through. */
export function rawMethod(path: string): MethodDef<Buffer, Buffer> {
  return { path, requestSerialize: (b) => b, responseDeserialize: (b) => b };
}

/** "NOT_FOUND" for 5; the number itself for a code no gRPC version defines (a broken peer). */
export function grpcCodeName(code: number): string {
  return grpc.status[code] ?? String(code);
}

export function isServiceError(err: unknown): err is grpc.ServiceError {
  return typeof err === "object" && err !== null && typeof (err as { code?: unknown }).code === "number" && "details" in err;
}

/** The driver's DEADLINE_EXCEEDED, or our call's own timer ending it (the same status). */
export function isDeadlineStatus(err: unknown): boolean {
  return isServiceError(err) && err.code === grpc.status.DEADLINE_EXCEEDED;
}

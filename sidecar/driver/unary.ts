// What a call to the driver is described by, and how it fails: a method definition (generated or
// raw bytes) and an error carrying the driver's gRPC status, which the sidecar passes on unchanged.
import * as grpc from "@grpc/grpc-js";

export interface MethodDef<Req, Res> {
  path: string;
  requestSerialize: (value: Req) => Buffer;
  responseDeserialize: (value: Buffer) => Res;
}

/** A driver call that ended with a status other than OK (its own, or one the transport gave it). */
export class DriverCallError extends Error implements grpc.ServiceError {
  constructor(
    readonly code: grpc.status,
    readonly details: string,
    readonly metadata: grpc.Metadata = new grpc.Metadata(),
  ) {
    super(`${code} ${grpcCodeName(code)}: ${details}`);
    this.name = "DriverCallError";
  }
}

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

// How a unary call made by our own HTTP/2 client fails: with the gRPC status the peer (or the
// transport) gave, which callers pass on or decide on by code.
import { Metadata, status } from "@grpc/grpc-js";

/** A call that ended with a status other than OK. Its `metadata` holds the peer's trailers, if any. */
export class CallError extends Error {
  constructor(
    readonly code: status,
    readonly details: string,
    readonly metadata: Metadata = new Metadata(),
  ) {
    super(`${status[code] ?? code}: ${details}`);
    this.name = "CallError";
  }
}

/** A method as generated code describes it: its path, and how its messages cross the wire. */
export interface MethodDef<Req, Res> {
  path: string;
  requestSerialize: (value: Req) => Buffer;
  responseDeserialize: (value: Buffer) => Res;
}

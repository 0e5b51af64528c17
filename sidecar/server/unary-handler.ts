// Adapts a promise-returning handler to grpc-js: grpc-js does not await handlers, so every
// rejection is turned into exactly one status here and never escapes as an unhandled rejection.
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "../../common/log/logger.js";
import type { CallContext, Middleware, Next } from "./context.js";
import { toStatus } from "./status.js";

/**
 * Largest request metadata accepted, counted like HTTP/2's header list size (name + value + 32 per
 * entry). grpc-js servers ignore "grpc.max_metadata_size", so the limit is enforced here, before
 * any middleware: an oversized request costs no token review.
 */
export const MAX_METADATA_BYTES = 16 * 1024;

function metadataBytes(md: grpc.Metadata): number {
  let n = 0;
  for (const [key, values] of Object.entries(md.toJSON())) for (const v of values) n += key.length + v.length + 32;
  return n;
}

export function unaryHandler<Req, Res>(
  method: string,
  impl: Next<Req, Res>,
  middlewares: readonly Middleware[],
  logger: Logger,
): grpc.handleUnaryCall<Req, Res> {
  const chain = middlewares.reduceRight<Next<Req, Res>>((next, mw) => (req, ctx) => mw(req, ctx, next), impl);
  return (call, callback) => {
    if (metadataBytes(call.metadata) > MAX_METADATA_BYTES) {
      callback({ code: grpc.status.RESOURCE_EXHAUSTED, details: `request metadata larger than ${MAX_METADATA_BYTES} bytes`, metadata: new grpc.Metadata() });
      return;
    }
    const abort = new AbortController();
    call.on("cancelled", () => abort.abort(new Error("call cancelled by the caller")));
    const d = call.getDeadline();
    const deadline = d instanceof Date ? d.getTime() : d === Infinity || d === undefined ? Infinity : Number(d);
    const ctx: CallContext = {
      method,
      metadata: call.metadata,
      peer: call.getPeer(),
      deadline,
      signal: abort.signal,
      fields: {},
      logger,
    };
    // Through a promise, so a handler that throws synchronously is answered like one that rejects.
    Promise.resolve()
      .then(() => chain(call.request, ctx))
      .then(
        (res) => callback(null, res),
        (err: unknown) => {
          const st = toStatus(err);
          callback({ code: st.code, details: st.details, metadata: new grpc.Metadata() });
        },
      )
      // Only a throwing callback lands here; never let it become an unhandled rejection.
      .catch((err: unknown) => logger.error("answering a call failed", { method, error: err instanceof Error ? err.message : String(err) }));
  };
}

// Adapts a promise-returning handler to grpc-js: grpc-js does not await handlers, so every
// rejection is turned into exactly one status here and never escapes as an unhandled rejection.
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "../log/logger.js";
import type { CallContext, Middleware, Next } from "./context.js";
import { toStatus } from "./status.js";

export function unaryHandler<Req, Res>(
  method: string,
  impl: Next<Req, Res>,
  middlewares: readonly Middleware[],
  logger: Logger,
): grpc.handleUnaryCall<Req, Res> {
  const chain = middlewares.reduceRight<Next<Req, Res>>((next, mw) => (req, ctx) => mw(req, ctx, next), impl);
  return (call, callback) => {
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
    let answered = false;
    chain(call.request, ctx).then(
      (res) => {
        answered = true;
        callback(null, res);
      },
      (err: unknown) => {
        if (answered) return;
        answered = true;
        const st = toStatus(err);
        callback({ code: st.code, details: st.details, metadata: new grpc.Metadata() });
      },
    );
  };
}

// Cross-cutting concerns as middleware around every relay call: the effective deadline and the
// one log line per call with request-scoped fields.
import type { Middleware } from "./context.js";
import { toStatus } from "./status.js";
import { grpcCodeName } from "../driver/unary.js";

/** The deadline handlers see: the smaller of the caller's and --timeout. */
export function deadlineMiddleware(timeoutMs: number): Middleware {
  return (req, ctx, next) => {
    ctx.deadline = Math.min(ctx.deadline, Date.now() + timeoutMs);
    return next(req, ctx);
  };
}

export function loggingMiddleware(): Middleware {
  return async (req, ctx, next) => {
    const started = performance.now();
    const fields = () => ({ method: ctx.method, ...ctx.fields, user: ctx.user?.username, duration: Math.round(performance.now() - started) / 1000 });
    try {
      const res = await next(req, ctx);
      ctx.logger.info("call served", { ...fields(), code: "OK" });
      return res;
    } catch (err) {
      const st = toStatus(err);
      const line = { ...fields(), code: grpcCodeName(st.code), error: st.details };
      if (st.unexpected) ctx.logger.error("call failed unexpectedly", { ...line, cause: err instanceof Error ? err.message : String(err) });
      else ctx.logger.info("call failed", line);
      throw err;
    }
  };
}

// Cross-cutting concerns as middleware around every relay call: the effective deadline and the
// call log with request-scoped fields.
import * as grpc from "@grpc/grpc-js";
import type { RepeatedLines } from "../log/repeats.js";
import type { RefusalReason } from "../metrics/metrics.js";
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

export interface CallLogOptions {
  repeats: RepeatedLines;
  /** Each refused call, with the message the caller was sent. */
  onRefused(reason: RefusalReason, detail: string): void;
}

/**
 * A successful read (health, identity, Probe, the upstream Get* calls a controller polls) is
 * routine; a successful change (a heal, a fence, a promotion, ...) is what an operator acts on.
 */
const ROUTINE = /\/(Get|ControllerGet|Probe)[^/]*$/;

/**
 * One line per heal (and other change) and per failed or refused call; routine successful reads
 * only at debug, so the default level writes nothing on the hot path. Identical failures are
 * summarised (log/repeats.ts); refusals are also counted by reason.
 */
export function loggingMiddleware(opts: CallLogOptions): Middleware {
  return async (req, ctx, next) => {
    const started = performance.now();
    const fields = () => ({ method: ctx.method, ...ctx.fields, user: ctx.user?.username, duration: Math.round(performance.now() - started) / 1000 });
    try {
      const res = await next(req, ctx);
      if (!ROUTINE.test(ctx.method)) ctx.logger.info("call served", { ...fields(), code: "OK" });
      else if (ctx.logger.isDebugEnabled()) ctx.logger.debug("call served", { ...fields(), code: "OK" });
      return res;
    } catch (err) {
      const st = toStatus(err);
      const code = grpcCodeName(st.code);
      const line = { ...fields(), code, error: st.details };
      const refusal = REFUSALS[st.code];
      if (refusal) {
        opts.onRefused(refusal, st.details);
        opts.repeats.log("warn", `refused|${refusal}`, "call refused", { ...line, reason: refusal, peer: ctx.peer });
      } else if (st.unexpected) {
        const cause = err instanceof Error ? err.message : String(err);
        opts.repeats.log("error", `unexpected|${ctx.method}|${cause}`, "call failed unexpectedly", { ...line, cause });
      } else {
        opts.repeats.log("info", `failed|${ctx.method}|${code}|${st.details}`, "call failed", line);
      }
      throw err;
    }
  };
}

const REFUSALS: Partial<Record<grpc.status, RefusalReason>> = {
  [grpc.status.UNAUTHENTICATED]: "unauthenticated",
  [grpc.status.PERMISSION_DENIED]: "permission_denied",
};

// Turns an async handler into a grpc-js unary handler. grpc-js ignores the promise an async handler
// returns, so a rejection would escape as an unhandled rejection and the call would hang; here every
// outcome becomes exactly one answer and exactly one call-log line.
import type { handleUnaryCall, sendUnaryData, ServerErrorResponse, ServerUnaryCall } from "@grpc/grpc-js";
import { CallLog, preciseNow, redactSecrets, type ServerName } from "./call-log.js";
import { Status, statusName, toStatusError } from "./status.js";

export interface CallContext {
  /** Aborted when the client cancels or the deadline passes: stop working, nobody is listening. */
  readonly signal: AbortSignal;
}

export interface RpcEnv {
  server: ServerName;
  log: CallLog;
  /** One human line per event, e.g. "recv /healer.v1.VolumeHealerNode/NodeHealVolume vol-1". */
  say: (line: string) => void;
  /** Resolves once the state changes made so far are in the state file. */
  written?: () => Promise<void>;
}

interface RequestType<Req> {
  toJSON(message: Req): unknown;
}

// The client's own deadline timer cancels the stream a moment before the server's timer for the
// same deadline fires, so a cancellation this close to the deadline is the deadline.
const DEADLINE_SLACK_MS = 100;

/** The deadline grpc-js computed from the caller's grpc-timeout on receipt; null without one. */
function deadlineOf(call: ServerUnaryCall<unknown, unknown>): number | null {
  const deadline = call.getDeadline();
  const ms = deadline instanceof Date ? deadline.getTime() : Number(deadline);
  return Number.isFinite(ms) ? ms : null;
}

function cancelCode(deadline: number | null): Status {
  return deadline !== null && Date.now() >= deadline - DEADLINE_SLACK_MS ? Status.DEADLINE_EXCEEDED : Status.CANCELLED;
}

function describe(method: string, request: unknown): string {
  const volumeId = (request as { volumeId?: unknown }).volumeId;
  return typeof volumeId === "string" && volumeId !== "" ? `${method} ${volumeId}` : method;
}

export function unary<Req, Res>(
  env: RpcEnv,
  method: { path: string },
  requestType: RequestType<Req>,
  handler: (request: Req, ctx: CallContext) => Promise<Res>,
): handleUnaryCall<Req, Res> {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
    const t0 = preciseNow();
    const time = new Date(t0).toISOString();
    const deadline = deadlineOf(call);
    const what = describe(method.path, call.request);
    env.say(`recv ${what}`);
    const aborter = new AbortController();
    let answered = false;
    // Logs the outcome unless the call already has one; returns whether this is the outcome.
    const settle = (code: Status, cancelled: number | null = null): boolean => {
      if (answered) return false;
      answered = true;
      const request = redactSecrets(requestType.toJSON(call.request));
      const t1 = cancelled ?? preciseNow();
      env.log.write({ time, server: env.server, method: method.path, request, t0, t1, deadline, cancelled, code: statusName(code) });
      return true;
    };
    // grpc-js also emits "cancelled" after a normal answer when the stream closes; settle() ignores it.
    call.on("cancelled", () => {
      const code = cancelCode(deadline);
      if (!settle(code, preciseNow())) return;
      env.say(`gone ${what} ${statusName(code)}`);
      aborter.abort();
    });
    // The answer waits until what the handler changed is in the state file (see state-store.ts).
    new Promise<Res>((resolve) => resolve(handler(call.request, { signal: aborter.signal })))
      .finally(() => env.written?.())
      .then(
        (response) => {
          if (settle(Status.OK)) callback(null, response);
        },
        (err: unknown) => {
          const { code, details } = toStatusError(err);
          if (!settle(code)) return;
          const error: ServerErrorResponse = Object.assign(new Error(details), { code, details });
          callback(error);
        },
      );
  };
}

// What a handler sees of a call: no grpc-js objects, just the method, metadata, an AbortSignal
// that fires on cancellation or deadline, and the effective deadline.
import type * as grpc from "@grpc/grpc-js";
import type { UserInfo } from "../kube/api.js";
import type { Logger } from "../../common/log/logger.js";

export interface CallContext {
  /** Full method path, e.g. /sidecar.v1.VolumeHealer/HealVolume. */
  readonly method: string;
  readonly metadata: grpc.Metadata;
  readonly peer: string;
  /** Absolute deadline in ms since the epoch; middleware may lower it. */
  deadline: number;
  readonly signal: AbortSignal;
  /** Request-scoped log fields (pv, volume_id, ...) that handlers add to. */
  readonly fields: Record<string, unknown>;
  logger: Logger;
  user?: UserInfo;
}

export type Next<Req, Res> = (req: Req, ctx: CallContext) => Promise<Res>;

/** Cross-cutting concern around every unary call (logging, auth, deadlines). */
export type Middleware = <Req, Res>(req: Req, ctx: CallContext, next: Next<Req, Res>) => Promise<Res>;

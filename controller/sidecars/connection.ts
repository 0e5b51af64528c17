// One channel to one sidecar, with the three things the controller asks it: is it SERVING
// (grpc.health.v1), what can its driver do (identity.Identity/GetCapabilities, relayed from the
// driver), and HealVolume. Every call carries a deadline and the bearer token; a heal can also be
// cancelled (its pass was superseded, or this replica stopped leading) instead of running to its deadline.
import { status } from "@grpc/grpc-js";
import { HealthCheckResponse_ServingStatus as ServingStatus, HealthService } from "../../proto/gen/grpc/health/v1/health.js";
import { IdentityService, type GetCapabilitiesResponse } from "../../proto/gen/identity/identity.js";
import { Capability_VolumeHealer_Type as HealerType } from "../../proto/gen/identity/identity.js";
import { HealVolumeRequest_Mode, VolumeHealerService, type HealVolumeResponse } from "../../proto/gen/sidecar/v1/healer.js";
import { HealReason, NodeHealVolumeResponse_Result, TargetResult_State, VolumeHealth_State } from "../../proto/gen/healer/v1/healer.js";
import { CallError, type MethodDef } from "../../common/grpc/call-error.js";
import type { HealerCapabilities, Mode, PodAnswer, Reason } from "../plan/types.js";
import { SidecarChannel } from "./channel.js";
import type { ChannelSetup } from "./credentials.js";
import { TokenUnavailableError } from "./node-tokens.js";
import { withDeadline } from "../../common/util/deadline.js";

const HEALER_SERVICE = "sidecar.v1.VolumeHealer";

export interface HealAnswer {
  result: "HEALED" | "NOT_NEEDED" | "NOT_HEALABLE" | "RESULT_UNSPECIFIED";
  health: string;
  message: string;
  /** What each pod on the node that uses the volume sees now, as the driver answered. */
  pods: PodAnswer[];
}

const POD_STATES = new Set<string>(["WHOLE_IN_PLACE", "RESTART_NEEDED", "NOT_MOUNTED"]);

/** A health check's outcome; `reason` is the status it answered, or why there was no answer. */
export type SidecarHealth = { state: "serving" } | { state: "not_serving" | "unreachable"; reason: string };

/** The bearer token for one sidecar's calls (undefined: none); may ask the API server for it. */
export type TokenGetter = (signal?: AbortSignal) => string | undefined | Promise<string | undefined>;

export class SidecarConnection {
  private readonly channel: SidecarChannel;

  constructor(
    readonly address: string,
    setup: ChannelSetup,
    private readonly token: TokenGetter,
    /** Told of a token the sidecar answered UNAUTHENTICATED, so the next call gets another. */
    private readonly refused: (token: string) => void = () => {},
  ) {
    this.channel = new SidecarChannel(address, setup);
  }

  /**
   * What the sidecar's health check says: SERVING, another status (or an error status), or no
   * answer and why (refused, a certificate the CA does not verify, the deadline). A health check
   * costs the sidecar nothing, so one left unanswered means the connection (or the node behind it)
   * is gone without a word: the next call dials a new one rather than waiting on it until its own
   * deadline; calls still on the old one may finish.
   */
  async health(timeoutMs: number): Promise<SidecarHealth> {
    try {
      const res = await this.call(HealthService.check, { service: HEALER_SERVICE }, timeoutMs, false);
      if (res.status === ServingStatus.SERVING) return { state: "serving" };
      return { state: "not_serving", reason: ServingStatus[res.status] ?? String(res.status) };
    } catch (err) {
      if (err instanceof CallError && err.code === status.DEADLINE_EXCEEDED) this.channel.redial();
      const reason = err instanceof Error ? err.message : String(err);
      // Any other status is an answer (a server without our health service says NOT_FOUND or UNIMPLEMENTED).
      const answered = err instanceof CallError && err.code !== status.UNAVAILABLE && err.code !== status.DEADLINE_EXCEEDED;
      return { state: answered ? "not_serving" : "unreachable", reason };
    }
  }

  async capabilities(timeoutMs: number): Promise<HealerCapabilities> {
    const res: GetCapabilitiesResponse = await this.call(IdentityService.getCapabilities, {}, timeoutMs);
    const types = res.capabilities.flatMap((c) => (c.type?.$case === "volumeHealer" ? [c.type.volumeHealer.type] : []));
    return { healVolume: types.includes(HealerType.HEAL_VOLUME), getVolumeHealth: types.includes(HealerType.GET_VOLUME_HEALTH) };
  }

  /** An aborted `signal` cancels the call: it ends with a CallError CANCELLED, and the sidecar sees it cancelled. */
  async heal(pvName: string, mode: Mode, reason: Reason, timeoutMs: number, signal?: AbortSignal): Promise<HealAnswer> {
    const res: HealVolumeResponse = await this.call(
      VolumeHealerService.healVolume,
      { pvName, mode: mode === "ALWAYS" ? HealVolumeRequest_Mode.ALWAYS : HealVolumeRequest_Mode.IF_ABNORMAL, reason: HealReason[reason] },
      timeoutMs,
      true,
      signal,
    );
    const result = NodeHealVolumeResponse_Result[res.result] as HealAnswer["result"] | undefined;
    const pods = res.pods.map((p): PodAnswer => {
      const state = TargetResult_State[p.state];
      return {
        namespace: p.namespace,
        name: p.name,
        uid: p.uid,
        state: POD_STATES.has(state ?? "") ? (state as PodAnswer["state"]) : "UNKNOWN",
        reason: p.reason,
        message: p.message,
      };
    });
    return { result: result ?? "RESULT_UNSPECIFIED", health: VolumeHealth_State[res.health?.state ?? 0] ?? "STATE_UNSPECIFIED", message: res.message, pods };
  }

  /** True once closed: every later call fails UNAVAILABLE. */
  get closed(): boolean {
    return this.channel.isClosed;
  }

  /** Closes the one connection the three calls share. */
  close(): void {
    this.channel.close();
  }

  private async call<Req, Res>(method: MethodDef<Req, Res>, req: Req, timeoutMs: number, withToken = true, signal?: AbortSignal): Promise<Res> {
    if (signal?.aborted) throw new CallError(status.CANCELLED, "cancelled before it was sent");
    const deadline = Date.now() + timeoutMs;
    let token: string | undefined;
    try {
      token = withToken ? await withDeadline(timeoutMs, signal, async (s) => this.token(s)) : undefined;
    } catch (err) {
      // An API server that is down or busy is worth a retry; a refused TokenRequest (RBAC) is not.
      const code = signal?.aborted ? status.CANCELLED : err instanceof TokenUnavailableError && err.transient ? status.UNAVAILABLE : status.UNAUTHENTICATED;
      throw new CallError(code, (err as Error).message);
    }
    try {
      return await this.channel.unary(method, req, { deadline, signal, headers: token ? { authorization: `Bearer ${token}` } : undefined });
    } catch (err) {
      if (token && err instanceof CallError && err.code === status.UNAUTHENTICATED) this.refused(token);
      throw err;
    }
  }
}

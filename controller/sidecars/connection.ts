// One channel to one sidecar, with the three things the controller asks it: is it SERVING
// (grpc.health.v1), what can its driver do (identity.Identity/GetCapabilities, relayed from the
// driver), and HealVolume. Every call carries a deadline and the bearer token; a heal can also be
// cancelled (its pass was superseded, or this replica stopped leading) instead of running to its deadline.
import * as grpc from "@grpc/grpc-js";
import { HealthCheckResponse_ServingStatus as ServingStatus, HealthClient } from "../../proto/gen/grpc/health/v1/health.js";
import { IdentityClient, type GetCapabilitiesResponse } from "../../proto/gen/identity/identity.js";
import { Capability_VolumeHealer_Type as HealerType } from "../../proto/gen/identity/identity.js";
import { HealVolumeRequest_Mode, VolumeHealerClient, type HealVolumeResponse } from "../../proto/gen/sidecar/v1/healer.js";
import { NodeHealVolumeResponse_Result, VolumeHealth_State } from "../../proto/gen/healer/v1/healer.js";
import type { HealerCapabilities, Mode } from "../plan/types.js";
import type { ChannelSetup } from "./credentials.js";

const HEALER_SERVICE = "sidecar.v1.VolumeHealer";

/** A call that ended with a gRPC status other than OK. */
export class CallError extends Error {
  constructor(readonly code: grpc.status, readonly details: string) {
    super(`${grpc.status[code] ?? code}: ${details}`);
    this.name = "CallError";
  }
}

export interface HealAnswer {
  result: "HEALED" | "NOT_NEEDED" | "NOT_HEALABLE" | "RESULT_UNKNOWN";
  health: string;
  message: string;
}

type Unary<Req, Res> = (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>, cb: (err: grpc.ServiceError | null, res: Res) => void) => grpc.ClientUnaryCall;

export class SidecarConnection {
  private readonly healer: VolumeHealerClient;
  private readonly identity: IdentityClient;
  private readonly health: HealthClient;

  constructor(
    readonly address: string,
    setup: ChannelSetup,
    private readonly token: () => string | undefined,
  ) {
    this.healer = new VolumeHealerClient(address, setup.credentials, setup.options);
    const shared = { ...setup.options, channelOverride: this.healer.getChannel() };
    this.identity = new IdentityClient(address, setup.credentials, shared);
    this.health = new HealthClient(address, setup.credentials, shared);
  }

  /** true when the sidecar says SERVING; false when it says anything else or cannot be reached. */
  async serving(timeoutMs: number): Promise<boolean> {
    try {
      const res = await this.call(this.health.check.bind(this.health), { service: HEALER_SERVICE }, timeoutMs, false);
      return res.status === ServingStatus.SERVING;
    } catch {
      return false;
    }
  }

  async capabilities(timeoutMs: number): Promise<HealerCapabilities> {
    const res: GetCapabilitiesResponse = await this.call(this.identity.getCapabilities.bind(this.identity), {}, timeoutMs);
    const types = res.capabilities.flatMap((c) => (c.type?.$case === "volumeHealer" ? [c.type.volumeHealer.type] : []));
    return { healVolume: types.includes(HealerType.HEAL_VOLUME), getVolumeHealth: types.includes(HealerType.GET_VOLUME_HEALTH) };
  }

  /** An aborted `signal` cancels the call: it ends with a CallError CANCELLED, and the sidecar sees it cancelled. */
  async heal(pvName: string, mode: Mode, timeoutMs: number, signal?: AbortSignal): Promise<HealAnswer> {
    const res: HealVolumeResponse = await this.call(
      this.healer.healVolume.bind(this.healer),
      { pvName, mode: mode === "ALWAYS" ? HealVolumeRequest_Mode.ALWAYS : HealVolumeRequest_Mode.IF_ABNORMAL },
      timeoutMs,
      true,
      signal,
    );
    const result = NodeHealVolumeResponse_Result[res.result] as HealAnswer["result"] | undefined;
    return { result: result ?? "RESULT_UNKNOWN", health: VolumeHealth_State[res.health?.state ?? 0] ?? "STATE_UNKNOWN", message: res.message };
  }

  /** Closes the one channel the three clients share. */
  close(): void {
    this.healer.close();
  }

  private call<Req, Res>(method: Unary<Req, Res>, req: Req, timeoutMs: number, withToken = true, signal?: AbortSignal): Promise<Res> {
    const md = new grpc.Metadata();
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(new CallError(grpc.status.CANCELLED, "cancelled before it was sent"));
      let token: string | undefined;
      try {
        token = withToken ? this.token() : undefined;
      } catch (err) {
        return reject(new CallError(grpc.status.UNAUTHENTICATED, (err as Error).message));
      }
      if (token) md.set("authorization", `Bearer ${token}`);
      const cancel = () => call.cancel();
      const call = method(req, md, { deadline: Date.now() + timeoutMs }, (err, res) => {
        signal?.removeEventListener("abort", cancel);
        if (err) reject(new CallError(err.code, err.details));
        else resolve(res);
      });
      signal?.addEventListener("abort", cancel, { once: true });
    });
  }
}

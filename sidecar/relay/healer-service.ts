// sidecar.v1.VolumeHealer: DESIGN 4.4 steps 1-7. The caller names a PV; everything the driver sees
// is derived from the Kubernetes API, so no caller can point the driver at an arbitrary volume.
import { DomainError, deadlineExceeded, invalidArgument, unavailable, unimplemented } from "../errors.js";
import type { DriverConnection, DriverInfo } from "../driver/connection.js";
import { isDeadlineStatus } from "../driver/unary.js";
import {
  HealReason,
  NodeHealVolumeResponse_Result as Result,
  VolumeHealerNodeService,
  VolumeHealth_State as State,
  type VolumeHealth,
} from "../../proto/gen/healer/v1/healer.js";
import {
  HealVolumeRequest_Mode as Mode,
  type GetVolumeHealthRequest,
  type GetVolumeHealthResponse,
  type HealVolumeRequest,
  type HealVolumeResponse,
} from "../../proto/gen/sidecar/v1/healer.js";
import type { CallContext } from "../server/context.js";
import { Limiter } from "./limiter.js";
import { isDnsSubdomain, kubeletRootOf } from "./names.js";
import { podResults, publishTargets } from "./targets.js";
import { fetchPublishContext, fetchStageSecrets, resolveVolume, type ResolvedVolume, type ResolverDeps } from "./resolve.js";
import { SingleFlight } from "../util/single-flight.js";
import { endedByDeadline, withDeadline } from "../util/deadline-signal.js";

export interface HealerServiceDeps {
  driver: DriverConnection;
  resolver: ResolverDeps;
  limiter: Limiter;
}

export interface HealerService {
  getVolumeHealth(req: GetVolumeHealthRequest, ctx: CallContext): Promise<GetVolumeHealthResponse>;
  healVolume(req: HealVolumeRequest, ctx: CallContext): Promise<HealVolumeResponse>;
}

export function createHealerService(deps: HealerServiceDeps): HealerService {
  const flights = new SingleFlight<GetVolumeHealthResponse | HealVolumeResponse>();
  const targetDeps = { pods: deps.resolver.pods, kubeletRoot: kubeletRootOf(deps.resolver.stagingRoot) };
  /** Each running flight's deadline and signal, by key. */
  const flightDeadlines = new Map<string, Flight>();

  /** Steps 1-2, then a shared execution per (method, pv, mode) bounded by the caller's deadline. */
  async function serve<T extends GetVolumeHealthResponse | HealVolumeResponse>(
    ctx: CallContext,
    pvName: string,
    key: string,
    need: "getVolumeHealth" | "healVolume",
    work: (driver: DriverInfo, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    if (!isDnsSubdomain(pvName)) {
      const shown = pvName.length > 64 ? `${JSON.stringify(pvName.slice(0, 64))}...` : JSON.stringify(pvName);
      throw invalidArgument(`pv_name ${shown} is not a valid PersistentVolume name (DNS-1123 subdomain)`);
    }
    ctx.fields["pv"] = pvName;
    const driver = deps.driver.driver;
    if (!deps.driver.ready || !driver) throw unavailable(`driver is not connected or not ready`);
    if (!driver[need]) {
      const cap = need === "getVolumeHealth" ? "GET_VOLUME_HEALTH" : "HEAL_VOLUME";
      throw unimplemented(`driver ${driver.name} does not offer the VolumeHealer ${cap} capability`);
    }
    const deadline = ctx.deadline;
    for (;;) {
      const answer = flights.do(key, ctx.signal, (shared) => {
        const flight: Flight = { deadline };
        flightDeadlines.set(key, flight);
        // The slot covers the Kubernetes reads too: a request that would be refused costs no API request.
        return withDeadline(shared, deadline, (signal) => ((flight.signal = signal), deps.limiter.run(() => work(driver, signal), signal))).finally(() => {
          if (flightDeadlines.get(key) === flight) flightDeadlines.delete(key);
        });
      });
      // The shared work (and the driver call) runs on the deadline of the caller that started it.
      const flight = flightDeadlines.get(key);
      const ends = flight?.deadline ?? deadline;
      try {
        return (await answer) as T;
      } catch (err) {
        const now = Date.now();
        if (now >= deadline) throw deadlineExceeded(`deadline exceeded while serving PersistentVolume ${pvName}`);
        // Joined work that ran out of its starter's shorter time: ours is not up, so it runs again
        // (one driver call at a time per volume still) rather than failing a caller early. Told by
        // the error as well as by the clock: timers run on the event loop's cached clock, so under
        // load a driver call's (ours, or the driver's from grpc-timeout) can end it a few ms before
        // Date.now() reaches the deadline it was set for.
        if (ends < deadline && (now >= ends || ranOutOfTime(err) || endedByDeadline(flight?.signal))) continue;
        throw err;
      }
    }
  }

  function health(vol: ResolvedVolume, deadline: number, signal: AbortSignal): Promise<VolumeHealth | undefined> {
    return deps.driver
      .call(
        VolumeHealerNodeService.nodeGetVolumeHealth,
        { volumeId: vol.volumeId, stagingTargetPath: vol.stagingTargetPath, volumePath: "", volumeContext: vol.volumeContext },
        deadline,
        signal,
      )
      .then((r) => r.health);
  }

  return {
    getVolumeHealth(req, ctx) {
      return serve(ctx, req.pvName, `health|${req.pvName}`, "getVolumeHealth", async (driver, signal) => {
        const vol = await resolveVolume(deps.resolver, req.pvName, driver.name, signal);
        ctx.fields["volume_id"] = vol.volumeId;
        return { health: await health(vol, ctx.deadline, signal), volumeId: vol.volumeId };
      });
    },

    healVolume(req, ctx) {
      const { mode, reason } = req;
      // Proto3 lets any number through, and 0 is a caller that forgot the field: a mode we do not
      // know (a newer caller's gentler one) must never become the most disruptive one.
      if (mode !== Mode.ALWAYS && mode !== Mode.IF_ABNORMAL) {
        throw invalidArgument(`mode ${String(mode)} is not a HealVolume mode (required: ALWAYS = 1 or IF_ABNORMAL = 2)`);
      }
      if (reason !== HealReason.DRIVER_RESTARTED && reason !== HealReason.VOLUME_ABNORMAL && reason !== HealReason.OPERATOR_REQUEST) {
        throw invalidArgument(`reason ${String(reason)} is not a heal reason (required: DRIVER_RESTARTED = 1, VOLUME_ABNORMAL = 2 or OPERATOR_REQUEST = 3)`);
      }
      // The reason is in the key: joined work must have been asked for the same reason.
      return serve(ctx, req.pvName, `heal|${req.pvName}|${mode}|${reason}`, "healVolume", async (driver, signal) => {
        if (mode === Mode.IF_ABNORMAL && !driver.getVolumeHealth) {
          throw unimplemented(`driver ${driver.name} cannot check health, so IF_ABNORMAL is not possible; use ALWAYS`);
        }
        const vol = await resolveVolume(deps.resolver, req.pvName, driver.name, signal);
        ctx.fields["volume_id"] = vol.volumeId;
        if (mode === Mode.IF_ABNORMAL) {
          const h = await health(vol, ctx.deadline, signal);
          if (h?.state !== State.ABNORMAL) {
            return { result: Result.NOT_NEEDED, health: h, message: "volume is not ABNORMAL", volumeId: vol.volumeId, pods: [] };
          }
        }
        const secrets = await fetchStageSecrets(deps.resolver, vol, signal);
        const publishContext = await fetchPublishContext(deps.resolver, vol, signal);
        const targets = await publishTargets(targetDeps, vol, signal);
        const res = await deps.driver.call(
          VolumeHealerNodeService.nodeHealVolume,
          {
            volumeId: vol.volumeId,
            stagingTargetPath: vol.stagingTargetPath,
            volumePath: "",
            volumeCapability: vol.capability,
            secrets,
            volumeContext: vol.volumeContext,
            publishContext,
            reason,
            targets: targets.map((t) => t.target),
          },
          ctx.deadline,
          signal,
        );
        return { result: res.result, health: res.health, message: res.message, volumeId: vol.volumeId, pods: podResults(targets, res) };
      });
    },
  };
}

/** One shared execution: the deadline it runs on, and the signal withDeadline gave it. */
interface Flight {
  deadline: number;
  signal?: AbortSignal;
}

/** A deadline's end, from the driver (its DEADLINE_EXCEEDED status) or from our own side. */
function ranOutOfTime(err: unknown): boolean {
  return (err instanceof DomainError && err.kind === "DeadlineExceeded") || isDeadlineStatus(err);
}

// 4. Sustained overload under deploy/'s memory settings: many callers, each sending HealVolume again
// as soon as it is answered, for a fixed time, against slow heals, through the default
// --max-inflight and --max-queue, with the sidecar started with the NODE_OPTIONS deploy/ gives it,
// and again as the image starts it in a pod that sets none (bench.ts runs both).
// What must hold: every call answered (a heal result, or RESOURCE_EXHAUSTED past the queue), the process
// alive and ready afterwards, and its resident memory below deploy/'s container limit throughout.
import * as grpc from "@grpc/grpc-js";
import { nodeHealVolumeResponse_ResultToJSON as resultName } from "../../proto/gen/healer/v1/healer.js";
import { HealVolumeRequest_Mode as Mode, VolumeHealerClient } from "../../proto/gen/sidecar/v1/healer.js";
import { call, codeName } from "../support/grpc.js";
import type { SidecarProcess } from "../demo/processes.js";
import { readDeployLimits } from "./deploy-limits.js";
import { sampleMemory } from "./memory.js";
import { pvName } from "./volumes.js";
import { reasonFor } from "../support/heal-request.js";

export interface OverloadSize {
  callers: number;
  seconds: number;
  healDelayMs: number;
}

export interface OverloadResult {
  callers: number;
  seconds: number;
  healDelayMs: number;
  nodeOptions: string;
  limit: string;
  limitBytes: number;
  deployFiles: string[];
  calls: number;
  outcomes: Record<string, number>;
  peakRssBytes: number;
  hwmBytes: number;
  samples: number;
  /** The sidecar still running and ready after the run. */
  survived: boolean;
}

/** Callers per client channel: the healer controller multiplexes its calls the same way. */
const CALLERS_PER_CHANNEL = 100;
/** A heal of a volume healed moments ago answers NOT_NEEDED; past the queue, RESOURCE_EXHAUSTED. */
const ANSWERED = new Set(["HEALED", "NOT_NEEDED", "RESOURCE_EXHAUSTED"]);

export function overloadEnv(): { env: NodeJS.ProcessEnv; limits: ReturnType<typeof readDeployLimits> } {
  const limits = readDeployLimits();
  return { env: { NODE_OPTIONS: limits.nodeOptions }, limits };
}

export async function sustainedOverload(
  sidecar: SidecarProcess,
  limits: ReturnType<typeof readDeployLimits>,
  size: OverloadSize,
  volumes: number,
): Promise<OverloadResult> {
  const channels = Array.from({ length: Math.ceil(size.callers / CALLERS_PER_CHANNEL) }, () => new VolumeHealerClient(sidecar.address, grpc.credentials.createInsecure()));
  const outcomes: Record<string, number> = {};
  let calls = 0;
  const sampler = sampleMemory(sidecar.pid, 20);
  const until = Date.now() + size.seconds * 1000;
  try {
    await Promise.all(
      Array.from({ length: size.callers }, async (_, caller) => {
        const client = channels[caller % channels.length]!;
        while (Date.now() < until) {
          const a = await call(client, client.healVolume, { pvName: pvName(caller % volumes), mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, { deadlineMs: 60_000 });
          const k = a.ok ? resultName(a.value.result) : codeName(a.code);
          outcomes[k] = (outcomes[k] ?? 0) + 1;
          calls++;
        }
      }),
    );
  } finally {
    for (const c of channels) c.close();
  }
  const mem = sampler.stop();
  const survived = sidecar.child.exitCode === null && (await sidecar.readyz().catch(() => ({ status: 0 }))).status === 200;
  const result: OverloadResult = {
    ...size,
    nodeOptions: limits.nodeOptions,
    limit: limits.limit,
    limitBytes: limits.limitBytes,
    deployFiles: limits.files,
    calls,
    outcomes,
    peakRssBytes: mem.peakRssBytes,
    hwmBytes: mem.hwmBytes,
    samples: mem.samples,
    survived,
  };
  const unanswered = Object.entries(outcomes).filter(([k]) => !ANSWERED.has(k));
  if (unanswered.length > 0) throw new Error(`overload: calls not answered as expected: ${JSON.stringify(outcomes)}`);
  if (!survived) throw new Error("overload: the sidecar did not survive the run (exited or not ready)");
  // The kernel updates VmHWM lazily; a sample may be higher.
  const peak = Math.max(mem.hwmBytes, mem.peakRssBytes);
  if (peak >= limits.limitBytes) {
    throw new Error(`overload: peak RSS ${peak} bytes reached deploy/'s limit ${limits.limit} (${limits.files.join(", ")})`);
  }
  return result;
}

// Kubernetes API requests of the periodic pass a healer controller makes over volumes the sidecar
// has already seen (GetVolumeHealth, then HealVolume IF_ABNORMAL on healthy volumes): per volume,
// watches not counted (they are standing streams, not per-request reads).
import { call } from "../support/grpc.js";
import { HealVolumeRequest_Mode as Mode, type VolumeHealerClient } from "../../proto/gen/sidecar/v1/healer.js";
import { requestTotal, type KubeChild } from "./kube.js";
import { pvName } from "./volumes.js";
import { reasonFor } from "../support/heal-request.js";

export interface RepeatedCheckCost {
  volumes: number;
  /** Requests per GetVolumeHealth of a volume already checked once. */
  perHealthCheck: number;
  /** Requests per HealVolume(IF_ABNORMAL) of a healthy volume already checked. */
  perIfAbnormalPass: number;
}

export async function repeatedCheckCost(kube: KubeChild, client: VolumeHealerClient, volumes: number): Promise<RepeatedCheckCost> {
  const pass = async (send: (i: number) => Promise<{ ok: boolean }>) => {
    await kube.reset();
    for (let i = 0; i < volumes; i++) if (!(await send(i)).ok) throw new Error(`repeated check of ${pvName(i)} failed`);
    const counts = await kube.counters();
    return requestTotal(counts, (k) => !k.startsWith("watch ")) / volumes;
  };
  const health = (i: number) => call(client, client.getVolumeHealth, { pvName: pvName(i) });
  await pass(health); // the first sight of each volume reads it
  const perHealthCheck = await pass(health);
  const perIfAbnormalPass = await pass((i) => call(client, client.healVolume, { pvName: pvName(i), mode: Mode.IF_ABNORMAL, reason: reasonFor(Mode.IF_ABNORMAL) }));
  return { volumes, perHealthCheck, perIfAbnormalPass };
}

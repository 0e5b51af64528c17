// PV by name → what the spec call needs, with the upstream sidecar's error codes: a PV that cannot
// be read, that is not CSI, or whose stage secret is missing is INVALID_ARGUMENT there, so it is
// here too (our own healer API is stricter: NOT_FOUND / FAILED_PRECONDITION).
import { invalidArgument } from "../errors.js";
import { isDnsSubdomain } from "../relay/names.js";
import { describeCsiVolume, fetchStageSecrets, type CsiVolume } from "../relay/resolve.js";
import type { CallContext } from "../server/context.js";
import type { UpstreamDeps, Work } from "./relay.js";

export async function resolvePv(deps: UpstreamDeps, ctx: CallContext, pvName: string, w: Work): Promise<CsiVolume> {
  if (!isDnsSubdomain(pvName)) {
    const shown = pvName.length > 64 ? `${JSON.stringify(pvName.slice(0, 64))}...` : JSON.stringify(pvName);
    throw invalidArgument(`pv_name ${shown} is not a valid PersistentVolume name`);
  }
  ctx.fields["pv"] = pvName;
  const pv = await deps.kube.getPersistentVolume(pvName, w.signal);
  if (!pv) throw invalidArgument(`PersistentVolume ${pvName} not found`);
  const csi = pv.spec.csi;
  if (!csi) throw invalidArgument(`PersistentVolume ${pvName} is not a CSI volume`);
  // Upstream does not check this; a handle of another driver must still never reach ours.
  if (csi.driver !== w.driver.name) throw invalidArgument(`PersistentVolume ${pvName} belongs to driver ${csi.driver}, not ${w.driver.name}`);
  ctx.fields["volume_id"] = csi.volumeHandle;
  return describeCsiVolume(pvName, pv, deps.stagingRoot);
}

/** nodeStageSecretRef's data, as upstream passes it for reclaim space and key rotation. */
export function pvSecrets(deps: UpstreamDeps, vol: CsiVolume, signal: AbortSignal): Promise<Record<string, string>> {
  return fetchStageSecrets(deps, vol, signal, invalidArgument);
}

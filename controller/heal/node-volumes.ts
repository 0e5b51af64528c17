// The volumes of a node that the informer caches cannot tell, each at the cost of API requests:
// those only the node's Pods show (a driver without an attach step), and, on a first sight, which
// of them an older node-plugin pod staged (DESIGN 7.1, 7.2). The node's Pods are listed only for a
// driver whose CSIDriver says attachRequired: false, from the API server's cache (resourceVersion=0).
import type { Logger } from "../../common/log/logger.js";
import type { ClusterView, KubeWrites } from "../kube/api.js";
import { KubeRequestError } from "../kube/api.js";
import { claimKey } from "../../common/kube/pod-claims.js";
import { stagedBeforePod } from "../plan/volumes.js";
import type { PvInfo, SidecarInfo } from "../plan/types.js";
import { parseEndpoint } from "../sidecars/endpoint.js";
import type { PassDeps } from "./pass.js";

/** How long a CSIDriver's attachRequired is believed: drivers are installed, rarely changed. */
const ATTACH_REQUIRED_TTL_MS = 60_000;

type Kube = Pick<KubeWrites, "claimsOnNode" | "attachRequired" | "podStartTime">;
type View = Pick<ClusterView, "volumesOfClaims" | "attachedSince">;

export function nodeVolumes(view: View, kube: Kube, logger: Logger): Required<Pick<PassDeps, "podVolumes" | "olderThanPod">> {
  const attach = new Map<string, { value: boolean; at: number }>();
  /** Whether the driver's volumes are found only through Pods; a CSIDriver we may not read counts as attaching (said once). */
  const needsPods = async (driver: string, signal: AbortSignal): Promise<boolean> => {
    const known = attach.get(driver);
    if (known && Date.now() - known.at < ATTACH_REQUIRED_TTL_MS) return !known.value;
    let value: boolean;
    try {
      value = await kube.attachRequired(driver, signal);
    } catch (err) {
      if (!(err instanceof KubeRequestError && err.status === 403)) throw err;
      if (!known) logger.warn("could not read the CSIDriver; the volumes of a driver without attach are skipped", { driver, error: err.message });
      value = true;
    }
    attach.set(driver, { value, at: Date.now() });
    return !value;
  };
  const claims = async (s: SidecarInfo, signal: AbortSignal) => ((await needsPods(s.driver, signal)) ? kube.claimsOnNode(s.nodeId, signal) : []);
  return {
    podVolumes: async (s, signal) =>
      view.volumesOfClaims(
        s,
        (await claims(s, signal)).map((c) => c.claim),
      ),
    async olderThanPod(s, pvs, signal) {
      const ep = parseEndpoint(s.endpoint);
      if (ep.kind !== "pod") return new Set();
      const started = await kube.podStartTime(ep.namespace, ep.pod, signal);
      if (started === undefined) return new Set();
      const since = view.attachedSince(s);
      const unknown = pvs.filter((pv) => !since.has(pv.name) && pv.claim);
      if (unknown.length > 0) {
        const byClaim = new Map((await claims(s, signal)).map((c) => [c.claim, c.since]));
        for (const pv of unknown) {
          const t = byClaim.get(claimKey(pv.claim!.namespace, pv.claim!.name));
          if (t !== undefined) since.set(pv.name, t);
        }
      }
      return stagedBeforePod(pvs, started, (pv: PvInfo) => since.get(pv.name));
    },
  };
}

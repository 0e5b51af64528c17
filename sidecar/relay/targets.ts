// A heal's publish targets: the Pods on this node that use the volume, each at the path where the
// kubelet published it for that Pod. Every path is made here from the kubelet's layout
// (names.ts); nothing a caller sends becomes part of one.
import { MountPropagation, TargetResult_State, type NodeHealVolumeResponse, type PublishTarget } from "../../proto/gen/healer/v1/healer.js";
import type { PodResult } from "../../proto/gen/sidecar/v1/healer.js";
import type { Propagation } from "../../common/kube/pod-claims.js";
import type { ClaimUser, PodClaims } from "./pod-claims.js";
import { isPodUid, publishTargetPath } from "./names.js";
import type { CsiVolume } from "./resolve.js";

const PROPAGATION: Record<Propagation, MountPropagation> = {
  None: MountPropagation.NONE,
  HostToContainer: MountPropagation.HOST_TO_CONTAINER,
  Bidirectional: MountPropagation.BIDIRECTIONAL,
};

export interface TargetDeps {
  pods: Pick<PodClaims, "usersOf">;
  /** The kubelet's root directory; undefined when it cannot be told (no targets are sent then). */
  kubeletRoot: string | undefined;
}

/** One target per Pod on this node that uses the volume's claim; none for a volume without a claim that holds. */
export async function publishTargets(deps: TargetDeps, vol: CsiVolume, signal: AbortSignal): Promise<{ target: PublishTarget; pod: ClaimUser }[]> {
  const root = deps.kubeletRoot;
  if (!root || !vol.claim) return [];
  const users = await deps.pods.usersOf(vol.claim.namespace, vol.claim.name, signal);
  // A UID that is not a UUID came from no API server: it names no path.
  return users
    .filter((p) => isPodUid(p.uid))
    .map((pod) => ({
      pod,
      target: {
        targetPath: publishTargetPath(root, vol.pvName, pod.uid, vol.block),
        podNamespace: pod.namespace,
        podName: pod.name,
        podUid: pod.uid,
        readonly: pod.readOnly,
        // A container holds a block device open as it got it: propagation does not apply.
        mountPropagation: vol.block ? MountPropagation.NONE : PROPAGATION[pod.propagation],
      },
    }));
}

/** The driver's answer per Pod; a target it did not answer for (or answered twice) is told as such. */
export function podResults(targets: readonly { target: PublishTarget; pod: ClaimUser }[], res: Pick<NodeHealVolumeResponse, "targets">): PodResult[] {
  const byPath = new Map<string, NodeHealVolumeResponse["targets"][number] | null>();
  for (const r of res.targets) byPath.set(r.targetPath, byPath.has(r.targetPath) ? null : r);
  return targets.map(({ target, pod }) => {
    const r = byPath.get(target.targetPath);
    const who = { namespace: pod.namespace, name: pod.name, uid: pod.uid };
    if (r === undefined)
      return { ...who, state: TargetResult_State.STATE_UNSPECIFIED, reason: "NotAnswered", message: "the driver did not answer for this pod's target" };
    if (r === null)
      return { ...who, state: TargetResult_State.STATE_UNSPECIFIED, reason: "AnsweredTwice", message: "the driver answered twice for this pod's target" };
    return { ...who, state: r.state, reason: r.reason, message: r.message };
  });
}

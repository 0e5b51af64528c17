// Does a driver attach its volumes? The kubelet asks the driver's CSIDriver before it stages a
// volume (csiPlugin.skipAttach): attachRequired: false means no attach step, no VolumeAttachment and
// an empty publish_context; true means the VolumeAttachment's metadata is the publish_context, and
// without a VolumeAttachment the volume is not staged. A heal asks the same when its volume has no
// VolumeAttachment (resolve.ts, fetchPublishContext), so a volume of a driver that attaches is never
// staged again without its attachment's metadata; and once a driver is known to have no attach
// step (CephFS, NFS), its heals read no VolumeAttachment at all (none would be found).
//
// attachRequired is immutable: it changes only when the CSIDriver is deleted and made again (a
// reinstall of the driver), so an answer is kept for a minute. No CSIDriver, or none the sidecar may
// read, leaves the question open, and the VolumeAttachment decides as before.
import type { Logger } from "../../common/log/logger.js";
import { KubeError, type KubeApi } from "../kube/api.js";
import { TtlCache } from "../util/ttl-cache.js";
import { reasonOf } from "./keep-watching.js";

const TTL_MS = 60_000;
const READ_TIMEOUT_MS = 10_000;
const REFUSED =
  "cannot read this driver's CSIDriver: a heal reads a VolumeAttachment even when the driver has no attach step (grant get on csidrivers: deploy/base/cluster-role.yaml)";

/** "absent" (404) and "refused" (403) are kept for the TTL like an answer; "failed" is asked again next time. */
type Answer = boolean | "absent" | "refused" | "failed";

export class AttachRequired {
  private readonly cache: TtlCache<Answer>;
  private warned = false;

  constructor(
    private readonly kube: Pick<KubeApi, "getCsiDriver">,
    private readonly logger: Logger,
    ttlMs = TTL_MS,
  ) {
    this.cache = new TtlCache(ttlMs, 16, (a) => a !== "failed");
  }

  /** What the driver's CSIDriver says (true when it leaves attachRequired unset); undefined when there is none or it cannot be read. */
  async required(driverName: string, signal: AbortSignal): Promise<boolean | undefined> {
    const answer = await this.cache.get(driverName, (shared) => this.read(driverName, shared), signal);
    return typeof answer === "boolean" ? answer : undefined;
  }

  /** True when the driver's CSIDriver said attachRequired: false within the TTL; asks nothing. */
  skipsAttach(driverName: string): boolean {
    return this.cache.peek(driverName) === false;
  }

  private async read(driverName: string, signal: AbortSignal): Promise<Answer> {
    try {
      const driver = await this.kube.getCsiDriver(driverName, AbortSignal.any([signal, AbortSignal.timeout(READ_TIMEOUT_MS)]));
      this.warned = false;
      // As the kubelet reads it: only an explicit false skips the attachment.
      return driver ? driver.spec?.attachRequired !== false : "absent";
    } catch (err) {
      if (signal.aborted) throw err;
      if (err instanceof KubeError && err.status === 403) {
        if (!this.warned) this.logger.warn(REFUSED, { driver: driverName, reason: reasonOf(err) });
        this.warned = true;
        return "refused";
      }
      this.logger.debug("could not read the CSIDriver", { driver: driverName, reason: reasonOf(err) });
      return "failed";
    }
  }
}

// Stage and named secrets cached briefly and bounded in size: a heal burst after a driver restart
// reads each secret once, and a rotated secret is seen within the TTL. Only found Secrets are kept:
// a missing one is read again on the next call, so an operator who creates it fixes the very next
// retry instead of one a TTL later.
import type { KubeApi } from "../kube/api.js";
import { TtlCache } from "../util/ttl-cache.js";

const READ_TIMEOUT_MS = 10_000;

export class SecretCache {
  private readonly cache: TtlCache<Record<string, string> | undefined>;

  constructor(
    private readonly kube: KubeApi,
    ttlMs: number,
    maxEntries = 256,
  ) {
    this.cache = new TtlCache(ttlMs, maxEntries, (data) => data !== undefined);
  }

  /**
   * `signal`: the caller's; it ends this caller's wait, and the read once no caller sharing it still
   * waits. The read keeps a deadline of its own too, for callers without one.
   */
  get(namespace: string, name: string, signal?: AbortSignal): Promise<Record<string, string> | undefined> {
    return this.cache.get(
      `${namespace}/${name}`,
      // Only on a miss, so the composite signal's cost is off the hot path.
      (shared) => this.kube.getSecretData(namespace, name, AbortSignal.any([shared, AbortSignal.timeout(READ_TIMEOUT_MS)])),
      signal,
    );
  }
}

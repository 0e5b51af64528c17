// Stage secrets cached briefly and bounded in size: a heal burst after a driver restart reads each
// secret once, and a rotated secret is seen within the TTL.
import type { KubeApi } from "../kube/api.js";
import { TtlCache } from "../util/ttl-cache.js";

const READ_TIMEOUT_MS = 10_000;

export class SecretCache {
  private readonly cache: TtlCache<Record<string, string> | undefined>;

  constructor(private readonly kube: KubeApi, ttlMs: number, maxEntries = 256) {
    this.cache = new TtlCache(ttlMs, maxEntries);
  }

  get(namespace: string, name: string): Promise<Record<string, string> | undefined> {
    // Its own deadline, not a caller's: several heals may share this read.
    return this.cache.get(`${namespace}/${name}`, () => this.kube.getSecretData(namespace, name, AbortSignal.timeout(READ_TIMEOUT_MS)));
  }
}

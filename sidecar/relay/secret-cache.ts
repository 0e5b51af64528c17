// Stage secrets cached briefly and bounded in size: a heal burst after a driver restart reads each
// secret once, and a rotated secret is seen within the TTL.
import type { KubeApi } from "../kube/api.js";

interface Entry {
  at: number;
  value: Promise<Record<string, string> | undefined>;
}

export class SecretCache {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly kube: KubeApi, private readonly ttlMs: number, private readonly maxEntries = 256) {}

  get(namespace: string, name: string, signal: AbortSignal): Promise<Record<string, string> | undefined> {
    const key = `${namespace}/${name}`;
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit && now - hit.at < this.ttlMs) return hit.value;
    const value = this.kube.getSecretData(namespace, name, signal);
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { at: now, value });
    // A failed read is not cached: the next heal asks again.
    value.catch(() => this.entries.get(key)?.value === value && this.entries.delete(key));
    return value;
  }
}

// A small cache of in-flight-or-settled lookups: entries live `ttlMs`, the oldest goes first past
// `maxEntries`, concurrent lookups of one key share one load, and a failed load is not kept.
export class TtlCache<V> {
  private readonly entries = new Map<string, { at: number; value: Promise<V> }>();

  constructor(private readonly ttlMs: number, private readonly maxEntries: number) {}

  get(key: string, load: () => Promise<V>): Promise<V> {
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit && now - hit.at < this.ttlMs) return hit.value;
    const value = load();
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { at: now, value });
    value.catch(() => this.entries.get(key)?.value === value && this.entries.delete(key));
    return value;
  }
}

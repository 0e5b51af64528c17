// A small cache of lookups: a value lives `ttlMs` from when its load began, the oldest goes first
// past `maxEntries`, and neither a failed load nor a value `keep` refuses is kept (an absence cached
// for the TTL would outlive the operator's fix). Concurrent lookups of one key share one load, as
// the relay's identical requests share one driver call: a caller's signal ends only its own wait,
// and the load is cancelled once no caller waits for it (it may hold what they held: a driver slot).
import { cancelledBy } from "../errors.js";
import { SingleFlight } from "./single-flight.js";

/** A caller without a signal never leaves: a load it joined runs to its end. */
const NEVER = new AbortController().signal;

export class TtlCache<V> {
  private readonly entries = new Map<string, { at: number; value: V }>();
  private readonly loads = new SingleFlight<V>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries: number,
    private readonly keep: (value: V) => boolean = () => true,
  ) {}

  get(key: string, load: (signal: AbortSignal) => Promise<V>, signal: AbortSignal = NEVER): Promise<V> {
    // Gone already: not answered, even from the cache, and refused as the load path refuses it (SingleFlight).
    if (signal.aborted) return Promise.reject(cancelledBy(signal));
    const hit = this.fresh(key);
    if (hit) return Promise.resolve(hit.value);
    return this.loads.do(key, signal, async (shared) => {
      const at = Date.now();
      const value = await load(shared);
      if (this.keep(value)) this.remember(key, at, value);
      return value;
    });
  }

  /** The value kept for `key` if it is still fresh; never loads (undefined also when nothing is kept). */
  peek(key: string): V | undefined {
    return this.fresh(key)?.value;
  }

  private fresh(key: string): { at: number; value: V } | undefined {
    const hit = this.entries.get(key);
    return hit && Date.now() - hit.at < this.ttlMs ? hit : undefined;
  }

  private remember(key: string, at: number, value: V): void {
    // Deleted first, so a key loaded again counts as the newest when the oldest must go.
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { at, value });
  }
}

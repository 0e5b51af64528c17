// Raw storage, the way etcd + the watch cache behave for the API server: one global revision
// counter (resourceVersion), ordered keys, a bounded event history per resource, as the API
// server's watch cache keeps one per resource (older revisions of a resource are "compacted",
// which is what makes a too-old resourceVersion answer 410; writes of other resources never age
// a resource's window, so an informer of unchanging PVs is not sent back to re-list by a flood of
// Events), while etcd itself keeps the last historyLimit revisions of all resources (a paginated
// list's snapshot, read from etcd, is gone once those move past it), and watchers that see every
// committed change in commit order. It knows nothing of
// validation or HTTP.
import { clone, metaOf, type Obj } from "./json.js";

export type EventType = "ADDED" | "MODIFIED" | "DELETED";
export interface StoreEvent {
  rv: number;
  type: EventType;
  /** storageKey of the resource ("group/plural"). */
  key: string;
  namespace: string;
  name: string;
  object: Obj;
  /** The object before this change (undefined for ADDED): lets list reconstruct past states. */
  prev?: Obj;
}

export interface Watcher {
  key: string;
  onEvent(e: StoreEvent): void;
  close(): void;
}

const objKey = (ns: string | undefined, name: string) => `${ns ?? ""}/${name}`;
const byKey = ([a]: readonly [string, Obj], [b]: readonly [string, Obj]) => (a < b ? -1 : a > b ? 1 : 0);

export class Store {
  private rv = 0;
  private readonly data = new Map<string, Map<string, Obj>>();
  /** Each resource's recent events, oldest first. */
  private readonly history = new Map<string, StoreEvent[]>();
  /** Per resource: every event with rv <= this is gone from its history. */
  private readonly compacted = new Map<string, number>();
  private readonly watchers = new Set<Watcher>();
  private readonly listeners: ((e: StoreEvent) => void)[] = [];
  /** Each resource's objects in key order, kept until it next changes (a paginated list reads it page after page). */
  private readonly ordered = new Map<string, readonly (readonly [string, Obj])[]>();

  constructor(private readonly historyLimit = 1000) {}

  currentRv(): number {
    return this.rv;
  }

  /** The oldest revision a watch of `key` can start from (its watch cache's window). */
  oldestAvailableRv(key: string): number {
    return this.compacted.get(key) ?? 0;
  }

  /** The oldest revision a list of `key` can read (etcd's compaction, and what `key`'s history can rebuild). */
  oldestListableRv(key: string): number {
    return Math.max(this.rv - this.historyLimit, this.oldestAvailableRv(key));
  }

  get(key: string, ns: string | undefined, name: string): Obj | undefined {
    return clone(this.data.get(key)?.get(objKey(ns, name)));
  }

  /** Objects in key order (namespace, then name), as etcd returns a range. */
  list(key: string, ns?: string): Obj[] {
    return this.range(key)!
      .filter(([k]) => ns === undefined || k.startsWith(`${ns}/`))
      .map(([, o]) => clone(o));
  }

  /**
   * The objects of `key` at revision `rv` (default: now) in key order, with their keys
   * ("namespace/name"), NOT copied: the caller only reads them and copies what it returns.
   * undefined when that revision has been compacted away.
   */
  range(key: string, rv = this.rv): readonly (readonly [string, Obj])[] | undefined {
    if (rv === this.rv) {
      let r = this.ordered.get(key);
      if (!r) this.ordered.set(key, (r = [...(this.data.get(key) ?? new Map<string, Obj>()).entries()].sort(byKey)));
      return r;
    }
    if (rv < this.oldestListableRv(key)) return undefined;
    const state = new Map(this.range(key)!);
    const history = this.history.get(key) ?? [];
    for (let i = history.length - 1; i >= 0 && history[i]!.rv > rv; i--) {
      const e = history[i]!;
      const k = objKey(e.namespace || undefined, e.name);
      if (e.prev) state.set(k, e.prev);
      else state.delete(k);
    }
    return [...state.entries()].sort(byKey);
  }

  /** How many objects of `key` (in `ns`) exist now; counting needs no key order, so no sort. */
  count(key: string, ns?: string): number {
    const objects = this.data.get(key);
    if (!objects || ns === undefined) return objects?.size ?? 0;
    let n = 0;
    for (const k of objects.keys()) if (k.startsWith(`${ns}/`)) n++;
    return n;
  }

  /** Events of `key` after `rv`, or undefined when some of them were compacted (→ 410 Gone). */
  eventsSince(key: string, rv: number): StoreEvent[] | undefined {
    if (rv < this.oldestAvailableRv(key)) return undefined;
    return (this.history.get(key) ?? []).filter((e) => e.rv > rv).map((e) => ({ ...e, object: clone(e.object), prev: clone(e.prev) }));
  }

  /** Writes `obj` (ADDED or MODIFIED) with a fresh resourceVersion; returns the stored copy. */
  put(key: string, obj: Obj): Obj {
    const meta = metaOf(obj);
    const ns = (meta.namespace as string | undefined) || undefined;
    const name = String(meta.name);
    let m = this.data.get(key);
    if (!m) this.data.set(key, (m = new Map()));
    const prev = m.get(objKey(ns, name));
    const stored = clone(obj);
    metaOf(stored).resourceVersion = String(++this.rv);
    m.set(objKey(ns, name), stored);
    this.ordered.delete(key);
    this.emit({ rv: this.rv, type: prev ? "MODIFIED" : "ADDED", key, namespace: ns ?? "", name, object: clone(stored), prev: clone(prev) });
    return clone(stored);
  }

  /**
   * Removes an object; the DELETED event and the returned copy carry the deletion's revision.
   * `finalState` is what the object looked like when it went (the update that removed its last
   * finalizer), else its stored state.
   */
  remove(key: string, ns: string | undefined, name: string, finalState?: Obj): Obj | undefined {
    const m = this.data.get(key);
    const prev = m?.get(objKey(ns, name));
    if (!m || !prev) return undefined;
    m.delete(objKey(ns, name));
    this.ordered.delete(key);
    const gone = clone(finalState ?? prev);
    metaOf(gone).resourceVersion = String(++this.rv);
    this.emit({ rv: this.rv, type: "DELETED", key, namespace: ns ?? "", name, object: clone(gone), prev: clone(prev) });
    return gone;
  }

  private emit(e: StoreEvent): void {
    let history = this.history.get(e.key);
    if (!history) this.history.set(e.key, (history = []));
    history.push(e);
    while (history.length > this.historyLimit) this.compacted.set(e.key, history.shift()!.rv);
    for (const w of this.watchers) if (w.key === e.key) w.onEvent({ ...e, object: clone(e.object), prev: clone(e.prev) });
    for (const l of this.listeners) l(e);
  }

  /** Internal subscribers (the built-in controllers) see every event of every key. */
  onEvent(listener: (e: StoreEvent) => void): void {
    this.listeners.push(listener);
  }

  watch(w: Watcher): () => void {
    this.watchers.add(w);
    return () => this.watchers.delete(w);
  }

  /** Ends open watches (all, or those of one resource when its CRD goes away). */
  closeWatchers(key?: string): void {
    for (const w of [...this.watchers]) {
      if (key !== undefined && w.key !== key) continue;
      this.watchers.delete(w);
      w.close();
    }
  }
}

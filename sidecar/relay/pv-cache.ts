// PersistentVolumes the relay has been asked about, each one known through its own watch
// (fieldSelector metadata.name=<name>, from resourceVersion 0) and kept for at most --pv-cache-ttl,
// so the periodic IF_ABNORMAL pass of a healer controller (every volume of the node, every few
// minutes, on every node) costs no API request per volume, and the burst of heals after a restart
// one per volume whose PV is watched already (its VolumeAttachment, read for publish_context) and
// two for one that is not (DESIGN 4.4). A watch from resourceVersion 0 begins with the PV as the
// API server's watch cache holds it (a synthetic ADDED), so one request both reads the PV and
// keeps it current.
//
// Node scope (DESIGN 9): nothing here lists or watches the PV collection, so what a sidecar asks
// of the API server, holds in memory and is sent follows its own node's volumes, never the size of
// the cluster. The price is one watch per cached PV: over HTTP/2 to the API server each is one
// stream (a node with 50 volumes in use holds 50; a connection carries as many as the server
// allows at once, kube-apiserver 100, and the transport dials another when they are taken:
// common/kube/h2-connection.ts; over the HTTP/1.1 fallback, one connection each), and the API
// server's watch cache answers each from memory. maxEntries bounds them, 1000 by default: more
// volumes in use than a node attaches, so a node's periodic pass finds all of its PVs here (at 200,
// the bench's node of 500 volumes watched anew three in five on every pass).
//
// Why entries cannot mislead:
// - spec.csi (driver, volumeHandle, volumeAttributes, nodeStageSecretRef) and spec.volumeMode are
//   immutable after creation, so what the relay derives from them never goes stale;
// - what can change — metadata.deletionTimestamp (a PV being deleted must be refused, DESIGN 4.4
//   step 3), mountOptions, accessModes — arrives on the PV's watch and replaces the entry; its
//   removal drops it and ends the watch;
// - an entry is served only while its watch stands: a failed or ended watch drops it, so a lost
//   watch costs requests, never truth (after a failed watch no new one starts for a while, 200 ms
//   doubling to 10 s, and requests read the PV: without watch permission a check costs one read);
// - a watch that has not shown its PV within a second (the PV does not exist, or the watch cache
//   is behind) is not trusted: the request reads the PV, and an absent PV is not kept, as one may
//   be created any moment;
// - the TTL bounds what a watch that stalls without failing could leave behind; an entry that
//   expires, or is evicted, ends its watch.
// The watch cache may lag etcd by moments. Heals are served from here too, and what that lag could
// cause is a heal of a PV whose deletion began within it, which is harmless: the driver only acts
// on a volume staged on its own node, and whether it is on this node is never cached (the watched
// Node or a VolumeAttachment read now must say so), so the heal can only restore a mount the
// kubelet has not yet taken down — which it then unstages as it would have anyway.
import type { KubeApi, PersistentVolume } from "../kube/api.js";
import { KubeError } from "../kube/api.js";
import type { Logger } from "../../common/log/logger.js";
import { Backoff } from "../../common/util/delay.js";
import { reasonOf } from "./keep-watching.js";
import { cancelledBy } from "../errors.js";

/** How long a new entry waits for its watch to show the PV before it is dropped (no request waits for it). */
const SHOW_TIMEOUT_MS = 10_000;

export interface PvCacheOptions {
  /** Entries, and so watches (HTTP/2 streams), at most. */
  maxEntries?: number;
  /** How long a request waits for a new watch to show the PV before it reads the PV itself (the watch cache answers in milliseconds). */
  waitMs?: number;
  now?: () => number;
}

interface Entry {
  at: number;
  /** As the watch showed it last; undefined until it has. */
  pv: PersistentVolume | undefined;
  stop: AbortController;
  /** Resolves true once the watch showed the PV, false when the entry is dropped first. */
  shown: Promise<boolean>;
  settle: (shown: boolean) => void;
  timer: NodeJS.Timeout;
}

export class PvCache {
  private readonly entries = new Map<string, Entry>();
  private closed = false;
  private warned = false;
  private readonly backoff = new Backoff(200, 10_000);
  /** No new watch before this time (after a failed one). */
  private watchAfter = 0;
  private readonly maxEntries: number;
  private readonly waitMs: number;
  private readonly now: () => number;

  constructor(
    private readonly kube: KubeApi,
    private readonly ttlMs: number,
    private readonly logger: Logger,
    opts: PvCacheOptions = {},
  ) {
    this.maxEntries = opts.maxEntries ?? 1000;
    this.waitMs = opts.waitMs ?? 1_000;
    this.now = opts.now ?? Date.now;
  }

  close(): void {
    this.closed = true;
    for (const name of [...this.entries.keys()]) this.drop(name);
  }

  /** Watches open now: one per entry. */
  get watching(): number {
    return this.entries.size;
  }

  /** The PV (undefined when it does not exist): as its watch shows it, else read now. */
  async get(name: string, signal: AbortSignal): Promise<PersistentVolume | undefined> {
    let entry = this.entries.get(name);
    if (entry && this.now() - entry.at >= this.ttlMs) {
      this.drop(name, entry);
      entry = undefined;
    }
    if (!entry && this.ttlMs > 0 && !this.closed && this.now() >= this.watchAfter) entry = this.watch(name);
    if (entry) {
      const shown = await waitShown(entry, signal, this.waitMs);
      if (shown && entry.pv && this.entries.get(name) === entry) {
        // The newest use goes last: the least recently used is evicted first.
        this.entries.delete(name);
        this.entries.set(name, entry);
        return entry.pv;
      }
      if (signal.aborted) throw cancelledBy(signal);
    }
    const pv = await this.kube.getPersistentVolume(name, signal);
    if (entry && !entry.pv && this.entries.get(name) === entry) {
      // Absent: not kept (it may be created any moment). Present: the watch is not delivering,
      // and requests read until a new one does.
      if (pv) this.watchAfter = this.now() + this.backoff.take();
      this.drop(name, entry);
    }
    return pv;
  }

  private watch(name: string): Entry {
    if (this.entries.size >= this.maxEntries) this.drop(this.entries.keys().next().value!);
    let settle!: (shown: boolean) => void;
    const shown = new Promise<boolean>((resolve) => (settle = resolve));
    const stop = new AbortController();
    const timer = setTimeout(() => this.drop(name, entry), SHOW_TIMEOUT_MS).unref();
    const entry: Entry = { at: this.now(), pv: undefined, stop, shown, settle, timer };
    this.entries.set(name, entry);
    void this.run(name, entry);
    return entry;
  }

  /** Drops the entry (only this one, when given: a newer entry of the name stays) and ends its watch. */
  private drop(name: string, only?: Entry): void {
    const e = this.entries.get(name);
    if (!e || (only && e !== only)) return;
    this.entries.delete(name);
    clearTimeout(e.timer);
    e.stop.abort();
    e.settle(false);
  }

  private async run(name: string, entry: Entry): Promise<void> {
    try {
      await this.kube.watchPersistentVolume()({ name, resourceVersion: "0", signal: entry.stop.signal }, (type, pv) => {
        if (type === "BOOKMARK" || this.entries.get(name) !== entry) return;
        if (type === "DELETED") return this.drop(name, entry);
        const first = entry.pv === undefined;
        entry.pv = pv;
        if (!first) return;
        this.backoff.reset();
        clearTimeout(entry.timer);
        // The TTL ends the watch too, so no stream outlives what it vouches for.
        entry.timer = setTimeout(() => this.drop(name, entry), Math.max(0, entry.at + this.ttlMs - this.now())).unref();
        entry.settle(true);
      });
    } catch (err) {
      if (entry.stop.signal.aborted) return;
      this.watchAfter = this.now() + this.backoff.take();
      // Without watch on PersistentVolumes (an older RBAC) the relay still works, one read per request.
      const forbidden = err instanceof KubeError && err.status === 403 && !this.warned;
      this.warned ||= forbidden;
      this.logger.log(forbidden ? "warn" : "debug", "PersistentVolume watch ended; reading the PV on every request until a watch stands again", {
        pv: name,
        reason: reasonOf(err),
      });
    } finally {
      // Ended by the server, failed, or stopped: an entry without its watch is never served.
      this.drop(name, entry);
    }
  }
}

/** Waits a little (within the caller's deadline) for the entry's watch to show the PV. */
function waitShown(e: Entry, signal: AbortSignal, waitMs: number): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", aborted);
      resolve(ok);
    };
    const aborted = () => done(false);
    const timer = setTimeout(() => done(false), waitMs);
    signal.addEventListener("abort", aborted, { once: true });
    void e.shown.then(done);
  });
}

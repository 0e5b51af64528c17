// PersistentVolumes the relay has read, each kept for at most --pv-cache-ttl and only while a watch
// of that one PV (fieldSelector metadata.name=<name>) stands, so the periodic IF_ABNORMAL pass of a
// healer controller (every volume of the node, every few minutes, on every node) costs no API
// request per volume, and the burst of heals after a driver restart costs one per volume (its
// VolumeAttachment, read for publish_context) — the "about one request per volume" of DESIGN 4.4.
//
// Node scope (DESIGN 9): nothing here lists or watches the PV collection, so what a sidecar asks
// of the API server, holds in memory and is sent follows its own node's volumes, never the size of
// the cluster. The price is one watch per cached PV: over HTTP/2 to the API server each is one
// stream (a node with 50 volumes in use holds 50; a connection carries as many as the server
// allows at once, kube-apiserver 100, and the transport dials another when they are taken:
// common/kube/h2-connection.ts; over the HTTP/1.1 fallback, one connection each), and the API
// server's watch cache answers each from memory. maxEntries bounds them, 1000 by default: more
// volumes in use than a node attaches, so a node's periodic pass finds all of its PVs here (at 200,
// the bench's node of 500 volumes read and watched anew three in five on every pass).
//
// Why entries cannot mislead:
// - spec.csi (driver, volumeHandle, volumeAttributes, nodeStageSecretRef) and spec.volumeMode are
//   immutable after creation, so what the relay derives from them never goes stale;
// - what can change — metadata.deletionTimestamp (a PV being deleted must be refused, DESIGN 4.4
//   step 3), the PV's removal, mountOptions, accessModes — arrives on the PV's watch, and any
//   event but a bookmark drops the entry and ends its watch: the next request reads the PV again;
// - an entry is served only once its watch has shown the PV at the very resourceVersion that was
//   read: the watch starts at resourceVersion 0 (the watch cache's state, then every change after
//   it), so a change between the read and the watch shows as a different version and the entry is
//   dropped. Not from the read's own resourceVersion: a PV's is its last change, often older than
//   the history the watch cache keeps, and such a watch would only answer 410 Expired;
// - an entry is served only while its watch stands: a failed or ended watch drops it, so a lost
//   watch costs requests, never truth (after a failed watch no new one starts for a while,
//   200 ms doubling to 10 s, so without watch permission a check costs one read, not two);
// - absent PVs are not kept: one may be created any moment;
// - the TTL bounds what a watch that stalls without failing could leave behind; an entry that
//   expires, or is evicted, ends its watch.
// Heals are served from here too. What a stale entry could still cause is a heal of a PV whose
// deletion began within the watch's delay, and that is harmless: the driver only acts on a volume
// staged on its own node, and whether it is on this node is never cached (the watched Node or a
// VolumeAttachment read now must say so), so the heal can only restore a mount the kubelet has
// not yet taken down — which it then unstages as it would have anyway.
import type { KubeApi, PersistentVolume } from "../kube/api.js";
import { KubeError } from "../kube/api.js";
import type { Logger } from "../../common/log/logger.js";
import { Backoff } from "../../common/util/delay.js";
import { reasonOf } from "./keep-watching.js";

/** How long a new entry waits for its watch to show the PV; then it is dropped. */
const STAND_TIMEOUT_MS = 10_000;
/** How long a request waits for that before it reads the PV itself (the watch cache answers in milliseconds). */
const WAIT_MS = 1_000;

export interface PvCacheOptions {
  /** Entries, and so watches (HTTP/2 streams), at most. */
  maxEntries?: number;
  now?: () => number;
}

interface Entry {
  at: number;
  pv: PersistentVolume;
  stop: AbortController;
  /** Resolves true once the watch showed the PV at the version read, false when the entry is dropped first. */
  stood: Promise<boolean>;
  settle: (stood: boolean) => void;
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
  private readonly now: () => number;

  constructor(
    private readonly kube: KubeApi,
    private readonly ttlMs: number,
    private readonly logger: Logger,
    opts: PvCacheOptions = {},
  ) {
    this.maxEntries = opts.maxEntries ?? 1000;
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

  /** The PV (undefined when it does not exist); from the cache while its watch vouches for it, else read now. */
  async get(name: string, signal: AbortSignal): Promise<PersistentVolume | undefined> {
    const hit = this.entries.get(name);
    if (hit) {
      if (this.now() - hit.at < this.ttlMs && (await standing(hit, signal)) && this.entries.get(name) === hit) {
        // The newest read goes last: the least recently read is evicted first.
        this.entries.delete(name);
        this.entries.set(name, hit);
        return hit.pv;
      }
      // Expired, or its watch did not show the PV in time (deleted meanwhile, or changed).
      this.drop(name, hit);
    }
    const pv = await this.kube.getPersistentVolume(name, signal);
    if (pv && this.ttlMs > 0 && !this.closed && this.now() >= this.watchAfter) this.keep(name, pv);
    return pv;
  }

  private keep(name: string, pv: PersistentVolume): void {
    const same = this.entries.get(name);
    // Two reads at once of an unchanged PV share one watch.
    if (same && same.pv.metadata.resourceVersion === pv.metadata.resourceVersion) return;
    this.drop(name);
    if (this.entries.size >= this.maxEntries) this.drop(this.entries.keys().next().value!);
    let settle!: (stood: boolean) => void;
    const stood = new Promise<boolean>((resolve) => (settle = resolve));
    const stop = new AbortController();
    const timer = setTimeout(() => this.drop(name, entry), STAND_TIMEOUT_MS).unref();
    const entry: Entry = { at: this.now(), pv, stop, stood, settle, timer };
    this.entries.set(name, entry);
    void this.watch(name, entry);
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

  private async watch(name: string, entry: Entry): Promise<void> {
    const version = entry.pv.metadata.resourceVersion;
    try {
      await this.kube.watchPersistentVolume()({ name, resourceVersion: "0", signal: entry.stop.signal }, (type, pv) => {
        if (type === "BOOKMARK") return;
        if (type === "ADDED" && version !== undefined && pv.metadata?.resourceVersion === version && this.entries.get(name) === entry) {
          this.backoff.reset();
          clearTimeout(entry.timer);
          // The TTL ends the watch too, so no stream outlives what it vouches for.
          entry.timer = setTimeout(() => this.drop(name, entry), Math.max(0, entry.at + this.ttlMs - this.now())).unref();
          entry.settle(true);
          return;
        }
        this.drop(name, entry);
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

/** Waits a little (within the caller's deadline) for the entry's watch to vouch for it. */
function standing(e: Entry, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", aborted);
      resolve(ok);
    };
    const aborted = () => done(false);
    const timer = setTimeout(() => done(false), WAIT_MS);
    signal.addEventListener("abort", aborted, { once: true });
    void e.stood.then(done);
  });
}

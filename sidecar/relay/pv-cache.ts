// PersistentVolumes the relay has read, kept for --pv-cache-ttl and kept honest by one watch of the
// PV collection, so the periodic IF_ABNORMAL pass of a healer controller (every volume of the node,
// every few minutes, on every node) costs no API request per volume, and the burst of heals after
// a driver restart costs one per volume (its VolumeAttachment, read for publish_context) — the
// "about one request per volume" of DESIGN 4.4.
//
// Why entries cannot mislead:
// - spec.csi (driver, volumeHandle, volumeAttributes, nodeStageSecretRef) and spec.volumeMode are
//   immutable after creation, so what the relay derives from them never goes stale;
// - what can change — metadata.deletionTimestamp (a PV being deleted must be refused, DESIGN 4.4
//   step 3), the PV's removal, mountOptions, accessModes — arrives as a watch event, which drops
//   the entry: the next request reads the PV again and sees the change;
// - entries are served only while the watch runs; when it fails they are all dropped and every
//   request reads the PV until a new watch stands, so a lost watch costs requests, never truth;
// - a read that raced an event for its PV is not stored (it may predate the event), nor one begun
//   before the watch stood (it may predate the version the watch starts from);
// - the TTL bounds what a watch that stalls without failing could leave behind.
// Heals are served from here too. What a stale entry could still cause is a heal of a PV whose
// deletion began within the watch's delay, and that is harmless: the driver only acts on a volume
// staged on its own node, and whether it is on this node is never cached (the watched Node or a
// VolumeAttachment read now must say so), so the heal can only restore a mount the kubelet has
// not yet taken down — which it then unstages as it would have anyway.
import type { KubeApi, PersistentVolume } from "../kube/api.js";
import { KubeError } from "../kube/api.js";
import type { Logger } from "../../common/log/logger.js";
import { delay, type Sleep } from "../../common/util/delay.js";
import { keepWatching, reasonOf } from "./keep-watching.js";

const READ_TIMEOUT_MS = 10_000;

export interface PvCacheOptions {
  maxEntries?: number;
  /** The wait between watch attempts (tests see the backoff without timing it). */
  sleep?: Sleep;
  now?: () => number;
}

export class PvCache {
  private readonly entries = new Map<string, { at: number; pv: PersistentVolume }>();
  /** Reads in flight by PV name, so an event for one of them marks the read as raced. */
  private readonly reading = new Map<string, number>();
  /** Bumped by every event that touches a cached or in-flight PV, when the watch stops and when it stands again. */
  private epoch = 0;
  /** The watch stands (or is being resumed from a known resourceVersion): entries may be served. */
  private live = false;
  private warned = false;
  private readonly stop = new AbortController();
  private readonly maxEntries: number;
  private readonly sleep: Sleep;
  private readonly now: () => number;

  constructor(
    private readonly kube: KubeApi,
    private readonly ttlMs: number,
    private readonly logger: Logger,
    opts: PvCacheOptions = {},
  ) {
    this.maxEntries = opts.maxEntries ?? 4096;
    this.sleep = opts.sleep ?? delay;
    this.now = opts.now ?? Date.now;
  }

  /** Starts the watch; without it (or with a TTL of 0) every request reads the PV. */
  start(): void {
    if (this.ttlMs > 0) this.watch();
  }

  close(): void {
    this.stop.abort();
    this.drop();
  }

  /** The PV (undefined when it does not exist); from the cache while that is safe, else read now. */
  async get(name: string, signal: AbortSignal): Promise<PersistentVolume | undefined> {
    if (this.live) {
      const hit = this.entries.get(name);
      if (hit && this.now() - hit.at < this.ttlMs) return hit.pv;
    }
    const epoch = this.epoch;
    this.reading.set(name, (this.reading.get(name) ?? 0) + 1);
    let pv: PersistentVolume | undefined;
    try {
      pv = await this.kube.getPersistentVolume(name, signal);
    } finally {
      const n = this.reading.get(name)! - 1;
      if (n === 0) this.reading.delete(name);
      else this.reading.set(name, n);
    }
    // Absent PVs are not kept: one may be created any moment, and its ADDED event would not find it.
    if (pv && this.live && epoch === this.epoch) {
      this.entries.delete(name);
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(name, { at: this.now(), pv });
    }
    return pv;
  }

  private touched(name: string | undefined): void {
    if (name === undefined || (!this.entries.has(name) && !this.reading.has(name))) return;
    this.entries.delete(name);
    this.epoch++;
  }

  private drop(): void {
    this.live = false;
    this.entries.clear();
    this.epoch++;
  }

  private watch(): void {
    let resourceVersion: string | undefined;
    void keepWatching({
      signal: this.stop.signal,
      sleep: this.sleep,
      attempt: async (delivered) => {
        // A list of one gives the collection's version: the watch starts there without replaying
        // every PV of the cluster, and sees every change after it.
        resourceVersion ??= await this.kube.persistentVolumesVersion(AbortSignal.any([this.stop.signal, AbortSignal.timeout(READ_TIMEOUT_MS)]));
        if (!this.live) {
          // A read begun before may answer from before the version the watch starts at: whatever
          // changed in between would never arrive as an event, so such a read is not kept.
          this.epoch++;
          this.live = true;
        }
        await this.kube.watchPersistentVolumes({ resourceVersion, signal: this.stop.signal }, (type, pv) => {
          delivered();
          if (pv.metadata?.resourceVersion) resourceVersion = pv.metadata.resourceVersion;
          if (type !== "BOOKMARK") this.touched(pv.metadata?.name);
        });
        // The server ended the stream (its timeout): resume where it left off, entries still good.
      },
      failed: (err) => {
        this.drop();
        resourceVersion = undefined;
        // Without list/watch on PersistentVolumes (an older RBAC) the relay still works, one read per request.
        const forbidden = err instanceof KubeError && err.status === 403 && !this.warned;
        this.warned ||= forbidden;
        this.logger.log(forbidden ? "warn" : "debug", "PersistentVolume watch ended; reading PVs on every request until it is back", { reason: reasonOf(err) });
      },
    });
  }
}

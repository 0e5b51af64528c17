// One list+watch cache of one resource. client-node's ListWatch relists by itself after a 410 but
// stops on any other error (API server restarted, connection refused); this restarts it with
// backoff, resuming from the last resourceVersion it saw.
import { EventEmitter } from "node:events";
import { ListWatch, Watch, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import { Backoff, delay } from "../../common/util/delay.js";
import type { Logger } from "../../common/log/logger.js";
import { listInPages, type PageFn } from "./paged-list.js";

export interface InformerEvents<T> {
  change: [type: "add" | "update" | "delete", obj: T];
}

/**
 * What the cache keeps of each object, as client-go's SetTransform: the fields the controller
 * reads, and metadata.name, namespace and resourceVersion, by which client-node's ListWatch tells
 * after a relist what changed or went away. Applied before the cache, to listed and watched
 * objects alike: a large cluster's PVs and VolumeAttachments are kept as a few strings each.
 */
export type Transform<T> = (o: T) => T;

/** client-node's Watch, handing the ListWatch each watched object transformed (errors and bookmarks as they come). */
class TransformingWatch<T extends KubernetesObject> extends Watch {
  constructor(kc: KubeConfig, private readonly transform: Transform<T>) {
    super(kc);
  }

  override watch(
    path: string,
    query: Parameters<Watch["watch"]>[1],
    callback: (phase: string, obj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(path, query, (phase, obj, watchObj) => {
      const change = phase === "ADDED" || phase === "MODIFIED" || phase === "DELETED";
      callback(phase, change ? this.transform(obj as T) : obj, watchObj);
    }, done);
  }
}

export class Informer<T extends KubernetesObject> extends EventEmitter<InformerEvents<T>> {
  private readonly lw: ListWatch<T>;
  private readonly stopped = new AbortController();
  private readonly backoff = new Backoff(200, 5_000);
  private restarting = false;

  constructor(
    kc: KubeConfig,
    readonly path: string,
    page: PageFn<T>,
    private readonly logger: Logger,
    transform?: Transform<T>,
  ) {
    super();
    const watch = transform ? new TransformingWatch(kc, transform) : new Watch(kc);
    this.lw = new ListWatch<T>(path, watch, () => listInPages(page, this.stopped.signal, transform), false);
    for (const type of ["add", "update", "delete"] as const) {
      this.lw.on(type, (o: T) => {
        this.backoff.reset();
        this.emit("change", type, o);
      });
    }
    this.lw.on("error", (err) => void this.restart(err));
  }

  /** Resolves once the first list is in the cache (a failed first list is retried). */
  async start(): Promise<void> {
    await this.lw.start();
    const synced = () => this.lw.latestResourceVersion() !== "";
    while (!synced() && !this.stopped.signal.aborted) await delay(50, this.stopped.signal);
  }

  list(): readonly T[] {
    return this.lw.list();
  }

  get(name: string, namespace?: string): T | undefined {
    return this.lw.get(name, namespace);
  }

  stop(): void {
    this.stopped.abort();
    void this.lw.stop();
  }

  private async restart(err: unknown): Promise<void> {
    if (this.restarting || this.stopped.signal.aborted) return;
    this.restarting = true;
    const ms = this.backoff.take();
    this.logger.warn("watch ended with an error; resuming", { path: this.path, error: errorText(err), retryInMs: ms });
    await delay(ms, this.stopped.signal);
    this.restarting = false;
    if (!this.stopped.signal.aborted) await this.lw.start();
  }
}

function errorText(err: unknown): string {
  if (err && typeof err === "object" && "statusCode" in err) return `HTTP ${String((err as { statusCode: unknown }).statusCode)}`;
  return err instanceof Error ? err.message : String(err);
}

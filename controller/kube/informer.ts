// One list+watch cache of one resource. client-node's ListWatch relists by itself after a 410 but
// stops on any other error (API server restarted, connection refused); this restarts it with
// backoff, resuming from the last resourceVersion it saw. Nor does a watch last forever (see
// WatchBounds): the cache must not go stale behind a connection that died without a word.
import { EventEmitter } from "node:events";
import { ApiException, ListWatch, Watch, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import { Backoff, delay } from "../../common/util/delay.js";
import type { Logger } from "../../common/log/logger.js";
import { listInPages, type PageFn } from "./paged-list.js";
import { httpStatusText } from "./status-text.js";

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

/** How long one watch may last; defaults as client-go's reflector. */
export interface WatchBounds {
  /** The `timeoutSeconds` of each watch request: the API server ends the watch then. */
  timeoutSeconds?: () => number;
  /** A watch without any event or bookmark (or without response headers) this long is given up and opened again. */
  idleMs?: number;
}

/**
 * 5 to 10 minutes, spread, as client-go's reflector: the server ends each watch, so a watch on a
 * connection that died silently is replaced at the latest then, and the informers of many
 * controllers do not all come back at once.
 */
export const watchTimeoutSeconds = (): number => Math.floor(300 * (1 + Math.random()));

/**
 * API servers send a bookmark about every minute to a watch that asked for them, so three
 * minutes of silence means the stream is dead (a half-open connection through a proxy that still
 * answers TCP keepalives, a stuck server), not a quiet resource. A server that sends no bookmarks
 * only costs a re-watch from the last resourceVersion every three minutes.
 */
export const WATCH_IDLE_MS = 3 * 60_000;

interface InformerWatchOptions<T> {
  path: string;
  transform?: Transform<T>;
  timeoutSeconds: () => number;
  idleMs: number;
  stopped: AbortSignal;
  logger: Logger;
  /** A failure the ListWatch could not report itself (see watch()). */
  failed: (err: unknown) => void;
}

/**
 * client-node's Watch for the ListWatch: watched objects transformed, watches bounded in time, and
 * a failure to set a watch up reported instead of thrown.
 */
class InformerWatch<T extends KubernetesObject> extends Watch {
  constructor(
    kc: KubeConfig,
    private readonly o: InformerWatchOptions<T>,
  ) {
    super(withResponseDeadline(kc, o.idleMs));
  }

  override async watch(
    path: string,
    query: Parameters<Watch["watch"]>[1],
    callback: (phase: string, obj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    let request: AbortController | undefined;
    let timer: NodeJS.Timeout | undefined;
    let idle = false;
    let ended = false;
    const arm = () => {
      if (ended) return;
      if (timer) timer.refresh();
      else
        timer = setTimeout(() => {
          idle = true;
          this.o.logger.info("watch silent too long; watching again", { path: this.o.path, idleMs: this.o.idleMs });
          request?.abort();
        }, this.o.idleMs).unref();
    };
    const end = (err: unknown) => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      // An idle watch is resumed at once, as one the server closed: only a failing server earns backoff.
      // client-node calls done without awaiting it, and ListWatch's done is async: a relist or
      // re-watch failing in it would be an unhandled rejection, which ends the process.
      Promise.resolve(done(idle ? null : err) as unknown).catch(this.o.failed);
    };
    const transform = this.o.transform;
    try {
      request = await super.watch(
        path,
        { ...query, timeoutSeconds: this.o.timeoutSeconds(), allowWatchBookmarks: true },
        (phase, obj, watchObj) => {
          arm();
          const change = transform && (phase === "ADDED" || phase === "MODIFIED" || phase === "DELETED");
          callback(phase, change ? transform(obj as T) : obj, watchObj);
        },
        end,
      );
    } catch (err) {
      // client-node sets the request up (token file, exec credential plugin, CA file) before its
      // try, so such a failure (a projected token briefly missing while it rotates) rejects here
      // and nothing would ever watch again; reported as a failed watch, it is retried with backoff.
      end(err);
      return new AbortController();
    }
    // ListWatch.stop() while the watch was being opened has no request to abort yet.
    if (this.o.stopped.aborted) request.abort();
    else arm();
    return request;
  }
}

/**
 * client-node gives a watch request no deadline at all: a server that accepts the connection and
 * never answers would hold the informer forever. node-fetch's `timeout` bounds the wait for the
 * response headers only; the stream after them is bounded by InformerWatch's idle timer.
 */
function withResponseDeadline(kc: KubeConfig, ms: number): KubeConfig {
  // A view, not a copy: credentials and TLS files are still read through kc, on each request.
  const view = Object.create(kc) as KubeConfig;
  view.applyToFetchOptions = async (opts) => ({ ...(await kc.applyToFetchOptions(opts)), timeout: ms });
  return view;
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
    bounds: WatchBounds = {},
  ) {
    super();
    const watch = new InformerWatch<T>(kc, {
      path,
      transform,
      timeoutSeconds: bounds.timeoutSeconds ?? watchTimeoutSeconds,
      idleMs: bounds.idleMs ?? WATCH_IDLE_MS,
      stopped: this.stopped.signal,
      logger,
      failed: (err) => void this.restart(err),
    });
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
    // Called as `void`: a rejection here would end the process.
    if (!this.stopped.signal.aborted) await this.lw.start().catch((e: unknown) => this.restart(e));
  }
}

function errorText(err: unknown): string {
  // A failed list is client-node's ApiException, whose message is the whole response, headers and
  // all, over several lines: the status and the API server's own word for it say what went wrong.
  if (err instanceof ApiException) return httpStatusText(err.code, err.body);
  // A refused watch (client-node's Watch) brings its status only.
  if (err && typeof err === "object" && "statusCode" in err) return httpStatusText(Number((err as { statusCode: unknown }).statusCode), undefined);
  return err instanceof Error ? err.message : String(err);
}

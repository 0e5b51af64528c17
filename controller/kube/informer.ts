// One list+watch cache of one resource. client-node's ListWatch relists by itself after a 410 but
// stops on any other error (API server restarted, connection refused); this restarts it with
// backoff, resuming from the last resourceVersion it saw.
import { EventEmitter } from "node:events";
import { ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject } from "@kubernetes/client-node";
import { Backoff, delay } from "../../common/util/delay.js";
import type { Logger } from "../../common/log/logger.js";

export interface InformerEvents<T> {
  change: [type: "add" | "update" | "delete", obj: T];
}

export class Informer<T extends KubernetesObject> extends EventEmitter<InformerEvents<T>> {
  private readonly lw: ListWatch<T>;
  private readonly stopped = new AbortController();
  private readonly backoff = new Backoff(200, 5_000);
  private restarting = false;

  constructor(
    kc: KubeConfig,
    readonly path: string,
    list: () => Promise<KubernetesListObject<T>>,
    private readonly logger: Logger,
  ) {
    super();
    this.lw = new ListWatch<T>(path, new Watch(kc), list, false);
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

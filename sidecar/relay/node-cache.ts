// This node's Node object, kept current by a watch by name, so "is this volume in use here?"
// costs no API request per heal.
import type { KubeApi, NodeInfo } from "../kube/api.js";
import type { Logger } from "../../common/log/logger.js";
import { Backoff, delay, type Sleep } from "../../common/util/delay.js";

export class NodeCache {
  private node: NodeInfo | undefined;
  private synced = false;
  private readonly stop = new AbortController();

  constructor(
    private readonly kube: KubeApi,
    private readonly nodeName: string,
    private readonly logger: Logger,
    /** The wait between watch attempts (tests see the backoff without timing it). */
    private readonly sleep: Sleep = delay,
  ) {}

  start(): void {
    void this.loop();
  }

  close(): void {
    this.stop.abort();
  }

  /** The cached Node; falls back to one direct read while the watch has not synced yet. */
  async get(signal: AbortSignal): Promise<NodeInfo | undefined> {
    if (this.synced) return this.node;
    return this.kube.getNode(this.nodeName, signal);
  }

  private async loop(): Promise<void> {
    const backoff = new Backoff(200, 10_000);
    while (!this.stop.signal.aborted) {
      try {
        const signal = AbortSignal.any([this.stop.signal, AbortSignal.timeout(10_000)]);
        this.node = await this.kube.getNode(this.nodeName, signal);
        this.synced = true;
        // No resourceVersion: a Node's own version is where it last changed, which on a quiet node
        // is older than the API server's watch window (410 Gone on every start). Without one, the
        // watch begins with the current Node (a synthetic ADDED) and then its changes.
        await this.kube.watchNode()(
          { name: this.nodeName, signal: this.stop.signal },
          (type, obj) => {
            backoff.reset();
            if (type === "BOOKMARK") return;
            this.node = type === "DELETED" ? undefined : obj;
          },
        );
      } catch (err) {
        this.synced = false;
        if (this.stop.signal.aborted) return;
        this.logger.debug("Node watch ended; restarting", { node: this.nodeName, reason: err instanceof Error ? err.message : String(err) });
        await this.sleep(backoff.take(), this.stop.signal);
      }
    }
  }
}

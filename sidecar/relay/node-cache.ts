// This node's Node object, kept current by a watch by name, so "is this volume in use here?"
// costs no API request per heal.
import type { KubeApi, NodeInfo } from "../kube/api.js";
import type { Logger } from "../../common/log/logger.js";
import { delay, type Sleep } from "../../common/util/delay.js";
import { keepWatching, reasonOf } from "./keep-watching.js";

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
    void keepWatching({
      signal: this.stop.signal,
      sleep: this.sleep,
      attempt: async (delivered) => {
        const signal = AbortSignal.any([this.stop.signal, AbortSignal.timeout(10_000)]);
        this.node = await this.kube.getNode(this.nodeName, signal);
        this.synced = true;
        // No resourceVersion: a Node's own version is where it last changed, which on a quiet node
        // is older than the API server's watch window (410 Gone on every start). Without one, the
        // watch begins with the current Node (a synthetic ADDED) and then its changes.
        await this.kube.watchNode()({ name: this.nodeName, signal: this.stop.signal }, (type, obj) => {
          delivered();
          if (type === "BOOKMARK") return;
          this.node = type === "DELETED" ? undefined : obj;
        });
      },
      failed: (err) => {
        this.synced = false;
        this.logger.debug("Node watch ended; restarting", { node: this.nodeName, reason: reasonOf(err) });
      },
    });
  }

  close(): void {
    this.stop.abort();
  }

  /** The cached Node; falls back to one direct read while the watch has not synced yet. */
  async get(signal: AbortSignal): Promise<NodeInfo | undefined> {
    if (this.synced) return this.node;
    return this.kube.getNode(this.nodeName, signal);
  }
}

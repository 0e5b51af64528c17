// One SidecarConnection per sidecar (CSIAddonsNode), replaced when its endpoint or its pod's IP
// changes. A pod:// endpoint costs one Pod GET, unless the sidecar was last found SERVING and the
// CSIAddonsNode still names the same pod (its createdByPodUID): a pod keeps its IP for life, so a
// pass after a driver restart, or a periodic one, reads nothing. One that was unreachable is read
// again (its pod may be gone). resolve() is called when a pass starts and after a sidecar was
// unreachable, never per volume.
import type { KubeWrites } from "../kube/api.js";
import { CREATED_BY_POD_UID } from "../plan/trigger.js";
import type { SidecarInfo } from "../plan/types.js";
import type { ChannelSetup } from "./credentials.js";
import { SidecarConnection } from "./connection.js";
import { hostPort } from "../../common/net/listen-host.js";
import { parseEndpoint } from "./endpoint.js";

/**
 * serving: healthy and its capabilities read; not_serving: its health check answers another
 * status (or an error status); unreachable: its health check gets no answer (refused, a
 * certificate the CA does not verify, the deadline); failing: SERVING, but GetCapabilities failed
 * (a refused token, a server that is not a healer sidecar); unresolved: its address could not be
 * found (pod gone, no IP yet).
 */
export type ConnectionState = "serving" | "not_serving" | "unreachable" | "failing" | "unresolved";

export class SidecarPool {
  private readonly conns = new Map<string, { endpoint: string; podUid: string | undefined; conn: SidecarConnection }>();
  private readonly states = new Map<string, ConnectionState>();

  constructor(
    private readonly kube: Pick<KubeWrites, "podIP">,
    private readonly setup: ChannelSetup,
    /** The bearer token for the sidecars of a node (per node with TokenRequest, the same for all from a file). */
    private readonly token: (node: string, signal?: AbortSignal) => string | undefined | Promise<string | undefined>,
    private readonly refused: (node: string, token: string) => void = () => {},
  ) {}

  /** The connection for the sidecar's current endpoint; throws when the endpoint cannot be resolved. */
  async resolve(s: SidecarInfo, signal: AbortSignal): Promise<SidecarConnection> {
    const ep = parseEndpoint(s.endpoint);
    const podUid = s.annotations[CREATED_BY_POD_UID] || undefined;
    const known = this.conns.get(s.key);
    if (ep.kind === "pod" && podUid && known?.endpoint === s.endpoint && known.podUid === podUid && this.states.get(s.key) === "serving") return known.conn;
    let address: string;
    if (ep.kind === "address") {
      address = ep.address;
    } else {
      const ip = await this.kube.podIP(ep.namespace, ep.pod, signal);
      // Aborted meanwhile, the sidecar may be forgotten already: a connection kept now would never be closed.
      signal.throwIfAborted();
      if (!ip) throw new Error(`pod ${ep.namespace}/${ep.pod} has no IP yet`);
      address = hostPort(ip, ep.port);
    }
    const current = this.conns.get(s.key);
    if (current && current.endpoint === s.endpoint && current.conn.address === address) {
      current.podUid = podUid;
      return current.conn;
    }
    current?.conn.close();
    const node = s.nodeId;
    const conn = new SidecarConnection(
      address,
      this.setup,
      (sig) => this.token(node, sig),
      (t) => this.refused(node, t),
    );
    this.conns.set(s.key, { endpoint: s.endpoint, podUid, conn });
    return conn;
  }

  setState(key: string, state: ConnectionState): void {
    this.states.set(key, state);
  }

  /** Sidecars by connection state, for the metrics. */
  countByState(): Record<ConnectionState, number> {
    const out: Record<ConnectionState, number> = { serving: 0, not_serving: 0, unreachable: 0, failing: 0, unresolved: 0 };
    for (const st of this.states.values()) out[st]++;
    return out;
  }

  forget(key: string): void {
    this.conns.get(key)?.conn.close();
    this.conns.delete(key);
    this.states.delete(key);
  }

  /** Every channel closed and every state forgotten, including sidecars that never got a channel. */
  close(): void {
    for (const { conn } of this.conns.values()) conn.close();
    this.conns.clear();
    this.states.clear();
  }
}

// One SidecarConnection per sidecar (CSIAddonsNode), replaced when its endpoint or its pod's IP
// changes. A sidecar is called only at an endpoint verified as its own (verify.ts): the Pod GET
// that finds a pod:// endpoint's IP also proves the pod is the one the object claims; a refused
// endpoint is told once per reason (onRefused) and gets no connection, no token and no call.
// A pod:// endpoint costs one Pod GET, unless the sidecar was last found SERVING and the
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
import { EndpointRefusedError, verifyAddress, verifySidecarPod, type VerifyPolicy } from "./verify.js";

/**
 * refused: its endpoint is not verified as the sidecar of the node it claims (never called);
 * serving: healthy and its capabilities read; not_serving: its health check answers another
 * status (or an error status); unreachable: its health check gets no answer (refused, a
 * certificate the CA does not verify, the deadline); failing: SERVING, but GetCapabilities failed
 * (a refused token, a server that is not a healer sidecar); unresolved: its address could not be
 * found (pod gone, no IP yet).
 */
export type ConnectionState = "serving" | "not_serving" | "unreachable" | "failing" | "unresolved" | "refused";

/** Every endpoint verified, no plain host:port called; any ServiceAccount. */
export const STRICT: VerifyPolicy = { serviceAccounts: [], allowUnverified: false };

export class SidecarPool {
  private readonly conns = new Map<string, { endpoint: string; podUid: string | undefined; conn: SidecarConnection }>();
  private readonly states = new Map<string, ConnectionState>();
  /** The last refusal told for each sidecar, so that one reason is told once, not per pass. */
  private readonly refusals = new Map<string, string>();

  constructor(
    private readonly kube: Pick<KubeWrites, "sidecarPod">,
    private readonly setup: ChannelSetup,
    /** The bearer token for the sidecars of a node (per node with TokenRequest, the same for all from a file). */
    private readonly token: (node: string, signal?: AbortSignal) => string | undefined | Promise<string | undefined>,
    private readonly refused: (node: string, token: string) => void = () => {},
    private readonly verify: { policy: VerifyPolicy; onRefused: (s: SidecarInfo, err: EndpointRefusedError) => void } = {
      policy: STRICT,
      onRefused: () => {},
    },
  ) {}

  /** The connection for the sidecar's current endpoint; throws when the endpoint cannot be resolved. */
  async resolve(s: SidecarInfo, signal: AbortSignal): Promise<SidecarConnection> {
    try {
      const conn = await this.verified(s, signal);
      this.refusals.delete(s.key);
      return conn;
    } catch (err) {
      if (!(err instanceof EndpointRefusedError)) throw err;
      // Whatever was connected before the object changed is no longer this sidecar's.
      this.conns.get(s.key)?.conn.close();
      this.conns.delete(s.key);
      this.states.set(s.key, "refused");
      if (this.refusals.get(s.key) !== err.message) {
        this.refusals.set(s.key, err.message);
        this.verify.onRefused(s, err);
      }
      throw err;
    }
  }

  private async verified(s: SidecarInfo, signal: AbortSignal): Promise<SidecarConnection> {
    const ep = parseEndpoint(s.endpoint);
    const podUid = s.annotations[CREATED_BY_POD_UID] || undefined;
    const known = this.conns.get(s.key);
    if (ep.kind === "pod" && podUid && known?.endpoint === s.endpoint && known.podUid === podUid && this.states.get(s.key) === "serving") return known.conn;
    let address: string;
    if (ep.kind === "address") {
      verifyAddress(s, this.verify.policy);
      address = ep.address;
    } else {
      const pod = await this.kube.sidecarPod(ep.namespace, ep.pod, signal);
      // Aborted meanwhile, the sidecar may be forgotten already: a connection kept now would never be closed.
      signal.throwIfAborted();
      verifySidecarPod(s, ep, pod, this.verify.policy);
      if (!pod.ip) throw new Error(`pod ${ep.namespace}/${ep.pod} has no IP yet`);
      address = hostPort(pod.ip, ep.port);
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
    const out: Record<ConnectionState, number> = { serving: 0, not_serving: 0, unreachable: 0, failing: 0, unresolved: 0, refused: 0 };
    for (const st of this.states.values()) out[st]++;
    return out;
  }

  forget(key: string): void {
    this.conns.get(key)?.conn.close();
    this.conns.delete(key);
    this.states.delete(key);
    this.refusals.delete(key);
  }

  /** Every channel closed and every state forgotten, including sidecars that never got a channel. */
  close(): void {
    for (const { conn } of this.conns.values()) conn.close();
    this.conns.clear();
    this.states.clear();
    this.refusals.clear();
  }
}

// A token per node for the sidecars (least authority): the controller asks the TokenRequest API for its
// own ServiceAccount's token with the audience of the sidecar's node (csi-addons-healer/<node>),
// which that node's sidecars accept and every other node's refuse, so a token read off one node's
// connection opens nothing elsewhere. One token per node is kept until 80% of the lifetime the API
// server granted, then replaced on the next call; concurrent calls share one request, so a new
// node (or a restarted sidecar) costs one TokenRequest, not one per call. A token a sidecar
// refused (UNAUTHENTICATED) is dropped so the next call asks again. Should a renewal fail, the
// current token is used while it is still valid. At most MAX_ASKING TokenRequests are in flight: a
// controller that starts or takes over sees every node at once, and a thousand requests at once
// held a thousand connections' worth of TLS state and tripped its heap limit (the cluster bench);
// a few at a time cost the same requests and little waiting (each is answered in milliseconds).
import { nodeAudience } from "../../common/auth/audience.js";
import { KubeRequestError, type IssuedToken, type KubeWrites } from "../kube/api.js";

/** Fraction of its lifetime after which a token is replaced (client-go's projected-token refresh point). */
const REFRESH_AT = 0.8;
/** TokenRequests in flight at once. */
const MAX_ASKING = 8;

export class TokenUnavailableError extends Error {
  /** true: asking again later may work (the API server was unreachable or busy). */
  readonly transient: boolean;
  constructor(message: string, transient: boolean, options?: ErrorOptions) {
    super(message, options);
    this.name = "TokenUnavailableError";
    this.transient = transient;
  }
}

interface Held extends IssuedToken {
  refreshAtMs: number;
}

export class NodeTokens {
  private readonly held = new Map<string, Held>();
  private readonly asking = new Map<string, Promise<Held>>();
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly kube: Pick<KubeWrites, "requestToken">,
    private readonly serviceAccount: { namespace: string; name: string },
    private readonly expirationSeconds = 3600,
  ) {}

  /** The token for the sidecars of `node`. */
  async get(node: string, signal?: AbortSignal): Promise<string> {
    const now = Date.now();
    const current = this.held.get(node);
    if (current && now < current.refreshAtMs) return current.token;
    try {
      return (await this.renew(node, signal)).token;
    } catch (err) {
      if (current && Date.now() < current.expiresAtMs) return current.token;
      throw err;
    }
  }

  /** A sidecar refused `token`: forget it, so the next call for `node` asks for a new one. */
  refused(node: string, token: string): void {
    if (this.held.get(node)?.token === token) this.held.delete(node);
  }

  /** Forgets the token of a node that is gone. */
  forget(node: string): void {
    this.held.delete(node);
  }

  private renew(node: string, signal?: AbortSignal): Promise<Held> {
    let p = this.asking.get(node);
    if (!p) {
      const started = Date.now();
      const { namespace, name } = this.serviceAccount;
      // Not the caller's signal: the request is shared, and its result serves the next calls too.
      p = this.slot()
        .then(() => this.kube.requestToken(namespace, name, [nodeAudience(node)], this.expirationSeconds, AbortSignal.timeout(15_000)))
        .finally(() => this.release())
        .then((t) => {
          const held = { ...t, refreshAtMs: started + REFRESH_AT * Math.max(0, t.expiresAtMs - started) };
          this.held.set(node, held);
          return held;
        })
        .catch((err: unknown) => {
          const status = err instanceof KubeRequestError ? err.status : 0;
          const transient = status === 0 || status === 429 || status >= 500;
          const why = err instanceof Error ? err.message : String(err);
          throw new TokenUnavailableError(`cannot get a token for the sidecars of node ${node}: ${why}`, transient, { cause: err });
        })
        .finally(() => this.asking.delete(node));
      this.asking.set(node, p);
    }
    return signal ? raceAbort(p, signal) : p;
  }

  /** Waits for one of the MAX_ASKING slots (first come, first served). */
  private slot(): Promise<void> {
    if (this.inFlight < MAX_ASKING) {
      this.inFlight++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.inFlight--;
  }
}

function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

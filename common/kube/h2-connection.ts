// HTTP/2 to the API server, as client-go speaks it: one TLS connection carries every request and
// watch of the sidecar, and the controller's Event writes. Over HTTP/1.1 each request in flight
// needs a connection of its own, so the burst of heals after a driver restart opened up to
// --max-inflight new TLS connections (~4 ms of CPU each, on both ends, on every node at once) and
// each request cost about twice the CPU.
// The connection is dialled again when it closes or the server sends GOAWAY, and pinged, so one
// that died without a word (a network partition) is dropped within pingEveryMs + pingTimeoutMs
// rather than stalling every request until its deadline — client-go's HTTP/2 health check. A dial
// gets connectTimeoutMs to finish its TLS handshake, for the same reason.
// A connection carries at most the streams the server allows at once (its SETTINGS: kube-apiserver
// allows 100 unless --http2-max-streams-per-connection says otherwise), and watches hold theirs for
// minutes: past that, a request waited on the connection behind them until its deadline. So, as Go's
// HTTP/2 client does, a request that finds every connection full dials one more.
import * as http2 from "node:http2";
import type { SecureContextOptions } from "node:tls";
import type { Readable } from "node:stream";

export interface KubeResponse {
  status: number;
  body: Readable;
}

/** The server does not speak HTTP/2 (a proxy in front of it, say): the caller uses HTTP/1.1 instead. */
export class H2Refused extends Error {}

/** The server refused a stream unprocessed (RST_STREAM REFUSED_STREAM): safe to send again. */
class RefusedStream extends Error {}

export interface H2Options {
  tls: SecureContextOptions & { rejectUnauthorized: boolean };
  /** How often the connection is pinged (client-go's ReadIdleTimeout: 30 s). */
  pingEveryMs?: number;
  /** How long a ping may go unanswered before the connection is dropped (client-go's PingTimeout: 15 s). */
  pingTimeoutMs?: number;
  /** How long a dial may take to the end of its TLS handshake (client-go's TLSHandshakeTimeout: 10 s). */
  connectTimeoutMs?: number;
}

/** Streams a connection is taken to allow before any of its server's SETTINGS said: kube-apiserver's default. */
const STREAMS_BEFORE_SETTINGS = 100;

interface Live {
  s: http2.ClientHttp2Session;
  /** Streams open on it. */
  open: number;
  /** The server's SETTINGS have come: remoteSettings.maxConcurrentStreams is the server's. */
  settled: boolean;
}

export class H2Connection {
  /** Connections new requests may go to, oldest first (one retired by GOAWAY or closed is not here). */
  private sessions: Live[] = [];
  /** What the server's SETTINGS said last: a new connection is taken to allow as much until its own say. */
  private learned: number | undefined;
  /** Set for good once the server has said it does not speak h2. */
  refused = false;

  private readonly pingEveryMs: number;
  private readonly pingTimeoutMs: number;
  private readonly connectTimeoutMs: number;

  constructor(
    private readonly origin: URL,
    private readonly opts: H2Options,
  ) {
    this.pingEveryMs = opts.pingEveryMs ?? 30_000;
    this.pingTimeoutMs = opts.pingTimeoutMs ?? 15_000;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
  }

  close(): void {
    for (const l of this.sessions.splice(0)) l.s.destroy();
  }

  /** Lets the requests in flight finish, then closes; a request after this dials anew. */
  retire(): void {
    for (const l of this.sessions.splice(0)) l.s.close();
  }

  /** Connections open for new requests (for tests). */
  get connections(): number {
    return this.sessions.length;
  }

  /** Resolves with the response headers' status and the body stream; rejects before a response (H2Refused when h2 is not spoken). */
  async request(method: string, path: string, headers: Record<string, string>, payload: Buffer | undefined, signal: AbortSignal): Promise<KubeResponse> {
    try {
      return await this.once(method, path, headers, payload, signal);
    } catch (e) {
      // Sent before the server's SETTINGS said how many streams it takes at once, and refused for
      // that: it was not processed (RFC 9113 8.7), and now the session queues what is over the limit.
      if (!(e instanceof RefusedStream) || signal.aborted) throw e;
      return this.once(method, path, headers, payload, signal);
    }
  }

  private once(method: string, path: string, headers: Record<string, string>, payload: Buffer | undefined, signal: AbortSignal): Promise<KubeResponse> {
    const live = this.current();
    const session = live.s;
    return new Promise((resolve, reject) => {
      const stream = session.request({ ":method": method, ":path": path, ...headers }, { endStream: !payload, signal });
      // Like an idle keep-alive socket, an idle connection must not keep a finished program running.
      live.open++;
      session.ref();
      stream.once("close", () => {
        if (--live.open === 0 && !session.destroyed) session.unref();
      });
      stream.once("response", (h) => resolve({ status: Number(h[":status"]), body: stream }));
      stream.once("error", (e) => {
        this.noteRefusal(e);
        if (this.refused) reject(new H2Refused("the API server does not speak HTTP/2"));
        else if (stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM) reject(new RefusedStream(e.message, { cause: e }));
        else reject(e);
      });
      if (payload) stream.end(payload);
    });
  }

  /** The oldest connection with a stream to spare, else a new one. */
  private current(): Live {
    this.sessions = this.sessions.filter((l) => !l.s.closed && !l.s.destroyed);
    const room = this.sessions.find(
      (l) => l.open < (l.settled ? (l.s.remoteSettings.maxConcurrentStreams ?? Infinity) : (this.learned ?? STREAMS_BEFORE_SETTINGS)),
    );
    if (room) return room;
    const s = http2.connect(this.origin, { ...this.opts.tls, ALPNProtocols: ["h2"] });
    const live: Live = { s, open: 0, settled: false };
    this.sessions.push(live);
    s.once("remoteSettings", (settings) => {
      live.settled = true;
      this.learned = settings.maxConcurrentStreams;
    });
    const forget = () => {
      this.sessions = this.sessions.filter((l) => l !== live);
    };
    // Requests already on a connection the server is retiring finish there; new ones dial anew.
    s.once("goaway", forget);
    s.once("close", () => {
      forget();
      clearInterval(pings);
      clearTimeout(handshake);
    });
    // Each stream reports the failure to its own caller; the session only needs to be let go.
    s.on("error", (e) => {
      this.noteRefusal(e);
      forget();
    });
    // A dial that never ends (a load balancer that takes the TCP connection and never answers the
    // TLS handshake) would stay the session every request is sent on, each waiting out its deadline;
    // pings cannot tell, as a session still connecting is not pinged.
    const handshake = setTimeout(
      () => s.destroy(new Error(`the API server did not complete the TLS handshake within ${this.connectTimeoutMs} ms`)),
      this.connectTimeoutMs,
    ).unref();
    s.once("connect", () => {
      clearTimeout(handshake);
      if (s.alpnProtocol === "h2") return;
      this.refused = true;
      s.destroy();
    });
    let pinging = false;
    const pings = setInterval(() => {
      if (pinging || s.destroyed || s.closed || s.connecting) return;
      pinging = true;
      const silent = setTimeout(() => s.destroy(new Error("the API server did not answer an HTTP/2 ping")), this.pingTimeoutMs).unref();
      s.ping(() => {
        pinging = false;
        clearTimeout(silent);
      });
    }, this.pingEveryMs);
    pings.unref();
    return live;
  }

  /** A TLS server that offers no "h2" refuses the handshake; a stream learns it as its cause. */
  private noteRefusal(e: Error): void {
    if (failure(e) === "ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL") this.refused = true;
  }
}

/**
 * What a request failed with: a stream cancelled because its connection failed carries the
 * connection's error as its cause, which says more than the stream's own code.
 */
export function failure(e: Error): string {
  const { code, cause } = e as Error & { code?: string; cause?: Error & { code?: string } };
  return cause ? (cause.code ?? cause.message) : (code ?? e.message);
}

// One HTTP/2 connection to one sidecar, made when the first call needs it and again after it is
// lost; calls run on it through common/grpc/h2-unary.ts (which says why not a grpc-js channel).
// A dial that cannot finish (a refused or unverified certificate, nobody listening, a peer that
// never answers) fails the calls waiting for it UNAVAILABLE, and the next call dials anew. A
// connection without calls for IDLE_CLOSE_MS is closed: each open TLS connection holds some 130 KiB
// of native memory, and a controller of 1000 nodes would hold one to every sidecar between its
// passes for nothing (DESIGN 7.3).
import * as http2 from "node:http2";
import { isIP } from "node:net";
import { status } from "@grpc/grpc-js";
import { CallError, type MethodDef } from "../../common/grpc/call-error.js";
import { CONNECT_TIMEOUT_MS, h2Unary, type UnaryOptions } from "../../common/grpc/h2-unary.js";
import type { ChannelSetup } from "./credentials.js";

/** How long a connection stays open without calls. */
export const IDLE_CLOSE_MS = 30_000;

export class SidecarChannel {
  private session: http2.ClientHttp2Session | undefined;
  private dialling: Promise<http2.ClientHttp2Session> | undefined;
  /** The session being dialled, so close() can end it too. */
  private pending: http2.ClientHttp2Session | undefined;
  private closed = false;
  private readonly authority: Record<string, string>;
  /** Calls started and not yet answered, and the timer that closes the idle connection. */
  private active = 0;
  private idle: NodeJS.Timeout | undefined;

  constructor(
    readonly address: string,
    private readonly setup: ChannelSetup,
    private readonly idleCloseMs = IDLE_CLOSE_MS,
  ) {
    const name = setup.tls?.serverName;
    this.authority = name ? { ":authority": name } : {};
  }

  async unary<Req, Res>(def: MethodDef<Req, Res>, request: Req, opts: UnaryOptions): Promise<Res> {
    this.active++;
    clearTimeout(this.idle);
    try {
      const session = await this.connected(opts);
      return await h2Unary(session, def, request, { ...opts, headers: { ...this.authority, ...opts.headers } }, () => this.drop(session));
    } finally {
      if (--this.active === 0 && !this.closed) this.idle = setTimeout(() => this.session && this.drop(this.session), this.idleCloseMs).unref();
    }
  }

  /** A connection is open (an idle one is closed after idleCloseMs). */
  get isOpen(): boolean {
    return this.session !== undefined;
  }

  /** The next call dials a new connection; calls on the current one may finish. */
  redial(): void {
    if (this.session) this.drop(this.session);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.idle);
    this.session?.close();
    this.session = undefined;
    this.pending?.destroy();
  }

  /** The open session, or the one being dialled, waited for no longer than the call's deadline and signal. */
  private connected(opts: UnaryOptions): Promise<http2.ClientHttp2Session> {
    if (this.closed) return Promise.reject(new CallError(status.UNAVAILABLE, `connection to sidecar ${this.address} closed`));
    const open = this.session;
    if (open && !open.closed && !open.destroyed) return Promise.resolve(open);
    const dialling = (this.dialling ??= this.dial().finally(() => (this.dialling = undefined)));
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        opts.signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => (done(), reject(new CallError(status.CANCELLED, "cancelled while connecting")));
      const timer = setTimeout(
        () => (done(), reject(new CallError(status.DEADLINE_EXCEEDED, `deadline exceeded while connecting to sidecar ${this.address}`))),
        Math.max(0, opts.deadline - Date.now()),
      );
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      dialling.then(
        (s) => (done(), resolve(s)),
        (err: unknown) => (done(), reject(err)),
      );
    });
  }

  private dial(): Promise<http2.ClientHttp2Session> {
    const tls = this.setup.tls;
    const host = this.address.replace(/:\d+$/, "").replace(/^\[(.*)\]$/, "$1");
    const session = http2.connect(`${tls ? "https" : "http"}://${this.address}`, {
      ...(tls && {
        ca: tls.ca(),
        rejectUnauthorized: tls.verify,
        // The certificate is checked against this name (and it is sent as SNI), not the pod's IP.
        ...(tls.serverName ? { servername: tls.serverName } : isIP(host) ? {} : { servername: host }),
      }),
    });
    // An idle connection must not keep a stopping controller alive.
    session.unref();
    this.pending = session;
    return new Promise((resolve, reject) => {
      const fail = (why: string) => {
        clearTimeout(timer);
        if (this.pending === session) this.pending = undefined;
        session.destroy();
        reject(new CallError(status.UNAVAILABLE, `cannot connect to sidecar ${this.address}: ${why}`));
      };
      const timer = setTimeout(() => fail(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`), CONNECT_TIMEOUT_MS);
      timer.unref();
      session.on("error", (err) => fail(err.message));
      session.once("close", () => {
        this.drop(session);
        fail("connection closed");
      });
      session.once("goaway", () => this.drop(session));
      // Ready once the sidecar has spoken HTTP/2 (its SETTINGS), after TLS verified it.
      session.once("remoteSettings", () => {
        clearTimeout(timer);
        this.pending = undefined;
        if (this.closed) return fail("closed");
        this.session = session;
        resolve(session);
      });
    });
  }

  /** Lost, going away, or out of streams: the next call dials a new connection; calls in flight finish. */
  private drop(session: http2.ClientHttp2Session): void {
    if (this.session === session) this.session = undefined;
    if (!session.closed) session.close();
  }
}

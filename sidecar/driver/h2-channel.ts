// The one HTTP/2 connection to the driver's unix socket, kept open for the life of the sidecar:
// dialled again with capped, jittered backoff after any loss, at once when the socket file changes.
// The driver's calls run on it through common/grpc/h2-unary.ts, not through a grpc-js channel
// (that module says why).
import * as http2 from "node:http2";
import { connect as netConnect } from "node:net";
import { EventEmitter } from "node:events";
import { CallError, type MethodDef } from "../../common/grpc/call-error.js";
import { CONNECT_TIMEOUT_MS, h2Unary, type UnaryOptions } from "../../common/grpc/h2-unary.js";

/** Where the connection stands: "failure" is between a failed dial (or a loss) and the next dial. */
export type ChannelState = "connecting" | "ready" | "failure" | "closed";

export interface DriverChannelOptions {
  socketPath: string;
  /** Backoff between dials: `initial`, growing 1.6x a time up to `max`, ±20 % jitter. */
  backoffMs: { initial: number; max: number };
  /** The timer of the wait before the next dial (tests record the waits instead of timing them). */
  timers?: { set(dial: () => void, ms: number): NodeJS.Timeout; clear(timer: NodeJS.Timeout | undefined): void };
}

const TIMERS = { set: setTimeout, clear: clearTimeout };

interface Events {
  /** Every change of `state`. */
  state: [ChannelState];
}

const BACKOFF_GROWTH = 1.6;
/** The first wait after a socket change: see dialNow(). */
const SOCKET_CHANGE_BACKOFF_MS = 10;
const JITTER = 0.2;

export class DriverChannel extends EventEmitter<Events> {
  private session: http2.ClientHttp2Session | undefined;
  private current: ChannelState = "connecting";
  private nextBackoff: number;
  private timer: NodeJS.Timeout | undefined;
  /** The socket changed while a dial was in flight: if that dial fails, the next one goes at once. */
  private changedWhileDialling = false;

  private readonly timers: NonNullable<DriverChannelOptions["timers"]>;

  constructor(private readonly opts: DriverChannelOptions) {
    super();
    this.timers = opts.timers ?? TIMERS;
    this.nextBackoff = opts.backoffMs.initial;
    this.dial();
  }

  get state(): ChannelState {
    return this.current;
  }

  /** One unary call on the connection; UNAVAILABLE at once when it is not ready (no waiting for ready). */
  unary<Req, Res>(def: MethodDef<Req, Res>, request: Req, opts: UnaryOptions): Promise<Res> {
    const session = this.session;
    if (this.current !== "ready" || session === undefined) {
      return Promise.reject(new CallError(14, `driver not connected (${this.current}) at ${this.opts.socketPath}`));
    }
    return h2Unary(session, def, request, opts, () => this.lost(session));
  }

  /** Resolves true once ready, false at `deadline` (ms since epoch) or when closed. */
  waitReady(deadline: number): Promise<boolean> {
    return this.waitFor((s) => s === "ready", deadline).then((s) => s === "ready");
  }

  /** Resolves once the connection is no longer ready. */
  async waitNotReady(): Promise<void> {
    await this.waitFor((s) => s !== "ready", Infinity);
  }

  /**
   * The socket file changed: between attempts, dial now instead of when the backoff ends, and
   * start the backoff over, from a few milliseconds. A restarted driver removes the old socket (a
   * change too), binds the new one (a change: the file exists) and only then listens, so a dial at
   * the first change, or right after the bind, can still be refused: the next one goes at once if
   * the change came while that dial was in flight, else a few milliseconds later, not after the
   * longest wait the backoff had grown to (nor its shortest, 100 ms: the listen follows the bind
   * within microseconds).
   */
  dialNow(): void {
    if (this.current === "closed" || this.current === "ready") return;
    this.nextBackoff = Math.min(SOCKET_CHANGE_BACKOFF_MS, this.opts.backoffMs.initial);
    if (this.current === "connecting") this.changedWhileDialling = true;
    if (this.current !== "failure") return;
    this.timers.clear(this.timer);
    this.dial();
  }

  close(): void {
    this.timers.clear(this.timer);
    this.setState("closed");
    this.session?.close();
    // Streams still open are ended by destroy; their calls end UNAVAILABLE.
    this.session?.destroy();
    this.session = undefined;
  }

  private waitFor(done: (s: ChannelState) => boolean, deadline: number): Promise<ChannelState> {
    if (done(this.current) || this.current === "closed") return Promise.resolve(this.current);
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.off("state", onState);
        resolve(this.current);
      };
      const onState = (s: ChannelState) => (done(s) || s === "closed") && finish();
      const timer = deadline === Infinity ? undefined : setTimeout(finish, Math.max(0, deadline - Date.now()));
      this.on("state", onState);
    });
  }

  private setState(s: ChannelState): void {
    if (this.current === s || this.current === "closed") return;
    this.current = s;
    this.emit("state", s);
  }

  private dial(): void {
    if (this.current === "closed") return;
    this.setState("connecting");
    const session = http2.connect("http://localhost", {
      createConnection: () => netConnect(this.opts.socketPath),
      // The driver's messages may be up to 4 MiB (grpc-go's default); let them flow in one window.
      settings: { initialWindowSize: 4 * 1024 * 1024, enablePush: false },
    });
    this.session = session;
    const timeout = setTimeout(() => session.destroy(), CONNECT_TIMEOUT_MS);
    timeout.unref();
    // Errors end the session ('close' follows); without a listener they would be thrown.
    session.on("error", () => undefined);
    // Ready once the driver has spoken HTTP/2 (its SETTINGS), not merely accepted the socket.
    session.once("remoteSettings", () => {
      clearTimeout(timeout);
      if (this.session !== session) return;
      this.nextBackoff = this.opts.backoffMs.initial;
      this.changedWhileDialling = false;
      this.setState("ready");
    });
    session.once("goaway", () => this.lost(session));
    session.once("close", () => (clearTimeout(timeout), this.lost(session)));
    // It does not keep the process alive (the servers do). It has no idle timeout either: an idle
    // driver must never look like a restarted one.
    session.unref();
  }

  /** The session ended, is going away, or cannot take another stream: dial anew after the backoff. */
  private lost(session: http2.ClientHttp2Session): void {
    if (this.session !== session || this.current === "closed") return;
    this.session = undefined;
    // Calls in flight on a session the driver sent GOAWAY for may still finish; close() lets them.
    if (!session.closed) session.close();
    this.setState("failure");
    if (this.changedWhileDialling) {
      this.changedWhileDialling = false;
      this.dial();
      return;
    }
    const wait = this.nextBackoff * (1 - JITTER + Math.random() * 2 * JITTER);
    this.nextBackoff = Math.min(this.nextBackoff * BACKOFF_GROWTH, this.opts.backoffMs.max);
    this.timer = this.timers.set(() => this.dial(), wait);
    this.timer.unref();
  }
}

// The connection to the driver's CSI-Addons server: dial with capped backoff, never give up,
// read identity and capabilities, probe until ready, notice when the driver goes away or restarts.
import { EventEmitter } from "node:events";
import { status as grpcStatus } from "@grpc/grpc-js";
import { Capability_Service_Type, Capability_VolumeHealer_Type, IdentityService, type Capability } from "../../proto/gen/identity/identity.js";
import type { Logger } from "../../common/log/logger.js";
import type { MethodDef } from "../../common/grpc/call-error.js";
import { grpcCodeName, isDeadlineStatus, isServiceError } from "./unary.js";
import { DriverChannel, type ChannelState } from "./h2-channel.js";
import { delay } from "../../common/util/delay.js";
import { SocketWatch } from "./socket-watch.js";

export interface DriverInfo {
  name: string;
  vendorVersion: string;
  manifest: Record<string, string>;
  capabilities: Capability[];
  /** Convenience views of `capabilities`. */
  nodeService: boolean;
  /** A controller plugin: takes part in the Lease for controller operations. */
  controllerService: boolean;
  getVolumeHealth: boolean;
  healVolume: boolean;
}

export interface ReadyEvent {
  info: DriverInfo;
  /** The manifest's `bootId`: a value the driver changes with every process start (undefined when it reports none). */
  bootId: string | undefined;
  /** Since we last saw it ready, the driver came back with another boot id: it restarted, its mounts died. */
  restarted: boolean;
  /**
   * The connection was lost and is back, and the driver reports no boot id: it may have restarted
   * or not (a socket blip). A weaker signal than `restarted`, never both.
   */
  reconnected: boolean;
}

interface Events {
  ready: [ReadyEvent];
  down: [string];
}

export interface DriverConnectionOptions {
  socketPath: string;
  /** Deadline of each identity/probe call. */
  callTimeoutMs: number;
  logger: Logger;
  /** Told of every driver call as it ends: method path, status code, seconds (metrics). */
  observe?: (method: string, code: number, seconds: number) => void;
  /** How often "still waiting for driver" is logged. */
  waitLogIntervalMs?: number;
  /** Backoff between dial attempts (default 100 ms growing to RETRY_MS). */
  reconnectBackoffMs?: { initial: number; max: number };
  /** Wait after a failed handshake and between Probes that say not ready (default RETRY_MS). */
  retryMs?: number;
}

const RETRY_MS = 1000;

export class DriverConnection extends EventEmitter<Events> {
  /** One connection for every call, dialled again at once when the socket file changes. */
  private readonly channel: DriverChannel;
  private readonly socketWatch: SocketWatch;
  /** Set while waitConnected() waits: the socket file changed. */
  private socketChanged: (() => void) | undefined;
  private info: DriverInfo | undefined;
  private lastName = "unknown";
  private isReady = false;
  private readonly stop = new AbortController();
  private lastBootId: string | undefined;
  private everReady = false;
  private readonly retryMs: number;

  constructor(private readonly opts: DriverConnectionOptions) {
    super();
    this.retryMs = opts.retryMs ?? RETRY_MS;
    this.channel = new DriverChannel({
      socketPath: opts.socketPath,
      backoffMs: { initial: opts.reconnectBackoffMs?.initial ?? 100, max: opts.reconnectBackoffMs?.max ?? RETRY_MS },
    });
    this.socketWatch = new SocketWatch(opts.socketPath, () => this.socketChanged?.());
  }

  /** Where the connection to the driver stands (for tests and logs). */
  get channelState(): ChannelState {
    return this.channel.state;
  }

  get ready(): boolean {
    return this.isReady;
  }

  /** The driver's name as soon as GetIdentity told it (for metrics labels), else "unknown". */
  get name(): string {
    return this.lastName;
  }

  /** Identity and capabilities from the last successful connection. */
  get driver(): DriverInfo | undefined {
    return this.info;
  }

  start(): void {
    this.socketWatch.start();
    void this.loop();
  }

  close(): void {
    this.stop.abort();
    this.socketWatch.close();
    this.channel.close();
  }

  async call<Req, Res>(def: MethodDef<Req, Res>, request: Req, deadline: number, signal?: AbortSignal): Promise<Res> {
    const observe = this.opts.observe;
    if (observe === undefined) return this.channel.unary(def, request, { deadline, signal });
    const started = performance.now();
    try {
      const res = await this.channel.unary(def, request, { deadline, signal });
      observe(def.path, grpcStatus.OK, (performance.now() - started) / 1000);
      return res;
    } catch (err) {
      observe(def.path, isServiceError(err) ? err.code : grpcStatus.UNKNOWN, (performance.now() - started) / 1000);
      throw err;
    }
  }

  private async loop(): Promise<void> {
    const log = this.opts.logger;
    while (!this.stop.signal.aborted) {
      await this.waitConnected();
      if (this.stop.signal.aborted) return;
      try {
        const info = await this.handshake();
        // A driver that names its boot tells us exactly whether it restarted (its mounts are gone);
        // without one, a lost connection says only that it may have: the weaker signal.
        const bootId = info.manifest["bootId"] || undefined;
        const restarted = this.everReady && bootId !== undefined && bootId !== this.lastBootId;
        const reconnected = this.everReady && bootId === undefined;
        this.lastBootId = bootId;
        this.info = info;
        this.isReady = true;
        this.everReady = true;
        log.info("driver ready", {
          driver: info.name,
          vendorVersion: info.vendorVersion,
          bootId,
          restarted,
          reconnected,
          healer: { getVolumeHealth: info.getVolumeHealth, healVolume: info.healVolume },
        });
        this.emit("ready", { info, bootId, restarted, reconnected });
        await this.waitDisconnected();
        if (this.stop.signal.aborted) return;
        this.isReady = false;
        log.warn("driver connection lost; reconnecting", { socket: this.opts.socketPath });
        this.emit("down", "connection lost");
      } catch (err) {
        if (this.isReady) {
          this.isReady = false;
          this.emit("down", String(err));
        }
        log.warn("driver handshake failed; retrying", { socket: this.opts.socketPath, error: describe(err) });
        await delay(this.retryMs, this.stop.signal);
      }
    }
  }

  /**
   * Resolves once the connection is ready, logging every waitLogIntervalMs while it is not. When
   * the socket file appears while the connection is between attempts, it is dialled at once
   * instead of when the reconnect backoff (up to RETRY_MS) expires.
   */
  private async waitConnected(): Promise<void> {
    const started = Date.now();
    const every = this.opts.waitLogIntervalMs ?? 10_000;
    let logAt = started + every;
    while (!this.stop.signal.aborted) {
      const outcome = await new Promise<"ready" | "waiting" | "socket">((resolve) => {
        this.socketChanged = () => resolve("socket");
        void this.channel.waitReady(logAt).then((ready) => resolve(ready ? "ready" : "waiting"));
      });
      this.socketChanged = undefined;
      if (outcome === "ready" || this.stop.signal.aborted) return;
      if (outcome === "socket") {
        if (this.channel.state === "failure") this.opts.logger.debug("driver socket changed; dialling it now", { socket: this.opts.socketPath });
        this.channel.dialNow();
        continue;
      }
      this.opts.logger.info(`still waiting for driver at ${this.opts.socketPath}`, { waitedSeconds: Math.round((Date.now() - started) / 1000) });
      logAt = Date.now() + every;
    }
  }

  private async waitDisconnected(): Promise<void> {
    await this.channel.waitNotReady();
  }

  private async handshake(): Promise<DriverInfo> {
    const deadline = () => Date.now() + this.opts.callTimeoutMs;
    // GetIdentity first: its name labels the metrics of every later driver call.
    const identity = await this.call(IdentityService.getIdentity, {}, deadline());
    if (!identity.name) throw new Error("driver returned an empty name from GetIdentity");
    this.lastName = identity.name;
    // Then both at once: the driver is usually ready, and SERVING comes a round trip sooner.
    const [caps, ready] = await Promise.all([this.call(IdentityService.getCapabilities, {}, deadline()), this.probe(1)]);
    if (!ready) await this.probeUntilReady();
    const has = (pred: (c: Capability) => boolean) => caps.capabilities.some(pred);
    return {
      name: identity.name,
      vendorVersion: identity.vendorVersion,
      manifest: identity.manifest,
      capabilities: caps.capabilities,
      nodeService: has((c) => c.type?.$case === "service" && c.type.service.type === Capability_Service_Type.NODE_SERVICE),
      controllerService: has((c) => c.type?.$case === "service" && c.type.service.type === Capability_Service_Type.CONTROLLER_SERVICE),
      getVolumeHealth: has((c) => c.type?.$case === "volumeHealer" && c.type.volumeHealer.type === Capability_VolumeHealer_Type.GET_VOLUME_HEALTH),
      healVolume: has((c) => c.type?.$case === "volumeHealer" && c.type.volumeHealer.type === Capability_VolumeHealer_Type.HEAL_VOLUME),
    };
  }

  /** One Probe: true when ready; false when not yet (ready=false, or the Probe timed out). */
  private async probe(attempt: number): Promise<boolean> {
    try {
      const res = await this.call(IdentityService.probe, {}, Date.now() + Math.min(this.opts.callTimeoutMs, 10_000));
      // An unset `ready` means ready (CSI-Addons spec).
      if (res.ready !== false) return true;
      if (attempt === 1 || attempt % 10 === 0) this.opts.logger.info("driver not ready yet (Probe ready=false)", { attempt });
    } catch (err) {
      if (!isDeadlineStatus(err)) throw err;
      this.opts.logger.info("driver Probe timed out; retrying", { attempt });
    }
    return false;
  }

  /** After a first Probe that said not ready: probe every retryMs until ready. */
  private async probeUntilReady(): Promise<void> {
    for (let attempt = 2; ; attempt++) {
      await delay(this.retryMs, this.stop.signal);
      if (this.stop.signal.aborted || (await this.probe(attempt))) return;
    }
  }
}

function describe(err: unknown): string {
  return isServiceError(err) ? `${grpcCodeName(err.code)}: ${err.details}` : err instanceof Error ? err.message : String(err);
}

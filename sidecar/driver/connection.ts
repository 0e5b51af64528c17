// The connection to the driver's CSI-Addons server: dial with capped backoff, never give up,
// read identity and capabilities, probe until ready, notice when the driver goes away or restarts.
import { EventEmitter } from "node:events";
import * as grpc from "@grpc/grpc-js";
import {
  Capability_Service_Type,
  Capability_VolumeHealer_Type,
  IdentityService,
  type Capability,
} from "../../proto/gen/identity/identity.js";
import type { Logger } from "../../common/log/logger.js";
import { grpcCodeName, unaryCall, isServiceError, type MethodDef } from "./unary.js";
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
  /** The driver restarted since we last saw it ready: a new boot id, or (a driver without one) a lost connection. */
  restarted: boolean;
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
  interceptors?: grpc.Interceptor[];
  /** How often "still waiting for driver" is logged. */
  waitLogIntervalMs?: number;
  /** grpc-js reconnect backoff between dial attempts (default 100 ms growing to RETRY_MS). */
  reconnectBackoffMs?: { initial: number; max: number };
}

const RETRY_MS = 1000;

export class DriverConnection extends EventEmitter<Events> {
  /** One channel for every call, so the driver sees one connection; replaced only to dial a new socket at once. */
  private channel: grpc.Client;
  private readonly socketWatch: SocketWatch;
  /** Set while waitConnected() waits: the socket file changed. */
  private socketChanged: (() => void) | undefined;
  private info: DriverInfo | undefined;
  private lastName = "unknown";
  private isReady = false;
  private readonly stop = new AbortController();
  private lastBootId: string | undefined;
  private everReady = false;

  constructor(private readonly opts: DriverConnectionOptions) {
    super();
    this.channel = this.dial();
    this.socketWatch = new SocketWatch(opts.socketPath, () => this.socketChanged?.());
  }

  private dial(): grpc.Client {
    return new grpc.Client(`unix://${this.opts.socketPath}`, grpc.credentials.createInsecure(), {
      "grpc.initial_reconnect_backoff_ms": this.opts.reconnectBackoffMs?.initial ?? 100,
      "grpc.max_reconnect_backoff_ms": this.opts.reconnectBackoffMs?.max ?? RETRY_MS,
      "grpc.min_reconnect_backoff_ms": this.opts.reconnectBackoffMs?.initial ?? 100,
      // Never let an idle channel drop the connection: that would look like a driver restart.
      "grpc.client_idle_timeout_ms": 2 ** 31 - 1,
      // Its own subchannel: a channel dialled anew must not inherit the old one's backoff from the shared pool.
      "grpc.use_local_subchannel_pool": 1,
      interceptors: this.opts.interceptors ?? [],
    });
  }

  get client(): grpc.Client {
    return this.channel;
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

  call<Req, Res>(def: MethodDef<Req, Res>, request: Req, deadline: number, signal?: AbortSignal): Promise<Res> {
    return unaryCall(this.client, def, request, { deadline, signal });
  }

  private async loop(): Promise<void> {
    const log = this.opts.logger;
    while (!this.stop.signal.aborted) {
      await this.waitConnected();
      if (this.stop.signal.aborted) return;
      try {
        const info = await this.handshake();
        // A driver that names its boot tells us exactly whether it restarted (its mounts are gone);
        // without one, any lost connection has to count as a restart.
        const bootId = info.manifest["bootId"];
        const restarted = this.everReady && (bootId === undefined || bootId !== this.lastBootId);
        this.lastBootId = bootId;
        this.info = info;
        this.isReady = true;
        this.everReady = true;
        log.info("driver ready", { driver: info.name, vendorVersion: info.vendorVersion, bootId, restarted, healer: { getVolumeHealth: info.getVolumeHealth, healVolume: info.healVolume } });
        this.emit("ready", { info, restarted });
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
        await delay(RETRY_MS, this.stop.signal);
      }
    }
  }

  /**
   * Resolves once the channel is READY, logging every waitLogIntervalMs while it is not. When the
   * socket file appears while the channel is between attempts, a fresh channel dials it at once
   * instead of when grpc-js's reconnect backoff (up to RETRY_MS) expires.
   */
  private async waitConnected(): Promise<void> {
    const started = Date.now();
    const every = this.opts.waitLogIntervalMs ?? 10_000;
    let logAt = started + every;
    while (!this.stop.signal.aborted) {
      const outcome = await new Promise<"ready" | "waiting" | "socket">((resolve) => {
        this.socketChanged = () => resolve("socket");
        this.channel.waitForReady(logAt, (err) => resolve(err ? "waiting" : "ready"));
      });
      this.socketChanged = undefined;
      if (outcome === "ready" || this.stop.signal.aborted) return;
      if (outcome === "socket") {
        const state = this.channel.getChannel().getConnectivityState(false);
        if (state === grpc.connectivityState.TRANSIENT_FAILURE || state === grpc.connectivityState.IDLE) {
          this.opts.logger.debug("driver socket changed; dialling it now", { socket: this.opts.socketPath });
          const old = this.channel;
          this.channel = this.dial();
          old.close();
        }
        continue;
      }
      this.opts.logger.info(`still waiting for driver at ${this.opts.socketPath}`, { waitedSeconds: Math.round((Date.now() - started) / 1000) });
      logAt = Date.now() + every;
    }
  }

  private async waitDisconnected(): Promise<void> {
    const channel = this.client.getChannel();
    let state = channel.getConnectivityState(false);
    while (state === grpc.connectivityState.READY && !this.stop.signal.aborted) {
      await new Promise<void>((resolve) => channel.watchConnectivityState(state, Infinity, () => resolve()));
      state = channel.getConnectivityState(false);
    }
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
      if (!isServiceError(err) || err.code !== grpc.status.DEADLINE_EXCEEDED) throw err;
      this.opts.logger.info("driver Probe timed out; retrying", { attempt });
    }
    return false;
  }

  /** After a first Probe that said not ready: probe every RETRY_MS until ready. */
  private async probeUntilReady(): Promise<void> {
    for (let attempt = 2; ; attempt++) {
      await delay(RETRY_MS, this.stop.signal);
      if (this.stop.signal.aborted || (await this.probe(attempt))) return;
    }
  }
}

function describe(err: unknown): string {
  return isServiceError(err) ? `${grpcCodeName(err.code)}: ${err.details}` : err instanceof Error ? err.message : String(err);
}

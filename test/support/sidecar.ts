// Starts the sidecar as a real process (from source, through tsx) and gives tests gRPC clients.
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { VolumeHealerClient } from "../../proto/gen/sidecar/v1/healer.js";
import { join } from "node:path";
import type { DriverStub } from "./driver-stub.js";
import { call, track, type HealthCheck } from "./grpc.js";
import { tempDir, type Proc, startProgram } from "./proc.js";
import { waitFor } from "./wait.js";

export interface SidecarOptions {
  driverSocket: string;
  kubeconfig: string;
  nodeId?: string;
  pod?: string;
  namespace?: string;
  /** Extra flags, e.g. ["--max-inflight=8"]. Auth is off unless these turn it on. */
  args?: string[];
  env?: NodeJS.ProcessEnv;
  /** Leave the listen addresses at their defaults (every address) instead of 127.0.0.1. */
  listenAll?: boolean;
}

export interface SidecarProc {
  readonly proc: Proc;
  readonly port: number;
  readonly httpPort: number;
  readonly address: string;
  /** Where this sidecar writes a fatal exit's reason (--termination-log; never the host's /dev/termination-log). */
  readonly terminationLog: string;
  /** Every stdout line parsed as JSON (throws on a line that is not JSON). */
  logLines(): Record<string, unknown>[];
  /** Plaintext clients (auth off). */
  healer(): InstanceType<typeof VolumeHealerClient>;
  health(service?: string): Promise<string>;
  readyz(): Promise<number>;
  metrics(): Promise<string>;
  stop(): Promise<number | string>;
}

const HealthClient = grpc.makeClientConstructor(healthService as grpc.ServiceDefinition, "grpc.health.v1.Health");

export async function startSidecarProc(opts: SidecarOptions): Promise<SidecarProc> {
  const terminationLog = join(tempDir("sidecar-"), "termination-log");
  const args = [
    `--csi-addons-address=unix://${opts.driverSocket}`,
    `--node-id=${opts.nodeId ?? "node-1"}`,
    `--pod=${opts.pod ?? "csi-plugin-abcde"}`,
    `--namespace=${opts.namespace ?? "csi"}`,
    ...(opts.listenAll ? ["--http-endpoint=:0"] : ["--controller-ip=127.0.0.1", "--http-endpoint=127.0.0.1:0"]),
    "--controller-port=0",
    `--kubeconfig=${opts.kubeconfig}`,
    "--log-level=debug",
    `--termination-log=${terminationLog}`,
    ...(opts.args?.some((a) => a.startsWith("--enable-auth")) ? [] : ["--enable-auth=false"]),
    ...(opts.args ?? []),
  ];
  const proc = startProgram("sidecar", args, { env: opts.env });
  await proc.waitForOutput('"message":"sidecar started"', 30_000);
  const started = parseLines(proc.stdout()).find((l) => l["message"] === "sidecar started")!;
  const port = started["controllerPort"] as number;
  const httpPort = started["httpPort"] as number;
  const address = `127.0.0.1:${port}`;
  const clients: grpc.Client[] = [];
  const track = <T extends grpc.Client>(c: T) => (clients.push(c), c);
  const get = async (path: string) => fetch(`http://127.0.0.1:${httpPort}${path}`);
  return {
    proc,
    port,
    httpPort,
    address,
    terminationLog,
    logLines: () => parseLines(proc.stdout()),
    healer: () => track(new VolumeHealerClient(address, grpc.credentials.createInsecure())),
    health: (service = "") =>
      new Promise((resolve, reject) => {
        const c = track(new HealthClient(address, grpc.credentials.createInsecure()));
        (c as unknown as { check: HealthCheck }).check({ service }, { deadline: Date.now() + 5000 }, (err: Error | null, res: { status: string }) =>
          err ? reject(err) : resolve(res.status),
        );
      }),
    readyz: async () => (await get("/readyz")).status,
    metrics: async () => (await get("/metrics")).text(),
    async stop() {
      for (const c of clients) c.close();
      return proc.stop(10_000);
    },
  };
}

export function parseLines(text: string): Record<string, unknown>[] {
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        throw new Error(`sidecar wrote a line that is not JSON: ${l}`);
      }
    });
}

/** Waits until the sidecar's grpc health reports `status`. */
export function waitHealth(s: SidecarProc, status: "SERVING" | "NOT_SERVING", timeoutMs = 20_000): Promise<true> {
  return waitFor(`health ${status}`, async () => (await s.health().catch(() => "")) === status || undefined, { timeoutMs });
}

/**
 * A GetVolumeHealth through a sidecar, tracked, returned once the stub has it in hand: with a
 * delay in the stub's state it stays in flight (e.g. across a SIGTERM).
 */
export async function healthInFlight(client: InstanceType<typeof VolumeHealerClient>, stub: DriverStub, pvName: string, volumeId: string, deadlineMs: number) {
  const before = stub.arrived("NodeGetVolumeHealth", volumeId);
  const tracked = track(call(client, client.getVolumeHealth, { pvName }, { deadlineMs }));
  await waitFor(`the call for ${pvName} to reach the driver`, () => stub.arrived("NodeGetVolumeHealth", volumeId) > before);
  return tracked;
}

// The bench's soak: minutes of mixed calls from 32 callers against the sidecar (as the image runs
// it) while the driver is killed and restarted every 20 s and, half-way between restarts, the API
// server drops every watch and answers 500 for a while. It counts what matters to an operator:
// every call answered (sent = answered), none slower than its deadline, memory flat after the first
// minute, one driverRestartedAt per driver restart, and how long the sidecar takes to be SERVING
// again once the driver is back (reconnectMs; the driver's socket appearing is "back").
import { mkdirSync, statSync, watch } from "node:fs";
import { basename, dirname, join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { startKubeApi } from "../kube/index.js";
import { restartDriverStub, startDriverStub, type DriverStub } from "../support/driver-stub.js";
import { call, codeName, type Outcome } from "../support/grpc.js";
import { CSI_ADDONS_NODE_NAME, NAMESPACE } from "../support/fixtures.js";
import { IdentityClient } from "../../proto/gen/identity/identity.js";
import { HealVolumeRequest_Mode as Mode, VolumeHealerClient } from "../../proto/gen/sidecar/v1/healer.js";
import { spawnSidecar, type Cleanup } from "../demo/processes.js";
import { readMemory } from "./memory.js";
import { pvName, seedObjects, stubState } from "./volumes.js";
import { reasonFor } from "../support/heal-request.js";

export interface SoakResults {
  minutes: number;
  callers: number;
  volumes: number;
  /** Every call's deadline. */
  deadlineMs: number;
  sent: number;
  answered: number;
  /** Answers by gRPC status (OK included). */
  byCode: Record<string, number>;
  maxLatencyMs: number;
  /** Calls answered later than their deadline (+ LATE_SLACK_MS for the clocks). */
  lateCalls: number;
  driverRestarts: number;
  /** Distinct driverRestartedAt values the CSIAddonsNode carried, the first one included. */
  restartAnnotations: number;
  apiOutages: number;
  /** Driver's socket back → sidecar's gRPC health SERVING, per restart. */
  reconnectMs: number[];
  rssAfterFirstMinuteBytes: number;
  rssEndBytes: number;
  /** rssEnd / rssAfterFirstMinute - 1. */
  rssGrowth: number;
}

export interface SoakOptions {
  minutes: number;
  restartEveryMs: number;
  outageMs: number;
  volumes: number;
  dir: string;
  cleanup: Cleanup;
  progress: (line: string) => void;
  /** Extra sidecar flags. */
  args: string[];
}

const CALLERS = 32;
const DEADLINE_MS = 10_000;
const LATE_SLACK_MS = 250;
const CAN = "csiaddons.openshift.io/v1alpha1";
const RESTARTED_AT = "sidecar.csiaddons.openshift.io/driverRestartedAt";
const HealthClient = grpc.makeClientConstructor(healthService as grpc.ServiceDefinition, "grpc.health.v1.Health");

export async function soak(o: SoakOptions): Promise<SoakResults> {
  const kube = await startKubeApi({ tls: true, ...seedObjects(o.volumes) });
  o.cleanup.add("in-memory Kubernetes API (soak)", () => kube.stop());
  // Every fourth volume broken, so IF_ABNORMAL heals some and the state file keeps changing.
  const driverDir = join(o.dir, "soak-driver");
  mkdirSync(driverDir, { recursive: true });
  let stub: DriverStub = await startDriverStub({
    dir: driverDir,
    state: { volumes: Object.fromEntries(Object.entries(stubState(o.volumes, { state: "HEALTHY" }).volumes!).map(([id, v], i) => [id, i % 4 === 0 ? { ...v, state: "ABNORMAL" } : v])) },
  });
  o.cleanup.add("driver-stub (soak)", () => stub.stop());
  const sidecar = await spawnSidecar({ build: "compiled", driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath, logFile: join(o.dir, "sidecar-soak.log"), args: o.args });
  o.cleanup.add("sidecar (soak)", () => sidecar.stop());
  o.progress(`  soak sidecar pid ${sidecar.pid}, log ${sidecar.logFile}`);
  await sidecar.waitReadyz(200);

  const healer = new VolumeHealerClient(sidecar.address, grpc.credentials.createInsecure());
  const identity = new IdentityClient(sidecar.address, grpc.credentials.createInsecure());
  const health = new HealthClient(sidecar.address, grpc.credentials.createInsecure());
  o.cleanup.add("soak clients", () => [healer, identity, health].forEach((c) => c.close()));

  // When the sidecar turns SERVING (gRPC health Watch) and when the driver's socket appears: the
  // socket's ctime, the kernel's clock at bind(), not when this loop gets to the inotify event, which
  // under the callers' load can come after the sidecar's SERVING (1 ms after, seen).
  const servingAt: number[] = [];
  const watchHealth = (health as unknown as { watch(req: object): grpc.ClientReadableStream<{ status: string }> }).watch({ service: "" });
  watchHealth.on("data", (r: { status: string | number }) => (r.status === "SERVING" || r.status === 1) && servingAt.push(Date.now()));
  watchHealth.on("error", () => {});
  const socketAt: number[] = [];
  const socketWatch = watch(dirname(stub.addonsSocket), (_e, name) => {
    if (name !== basename(stub.addonsSocket)) return;
    const created = statSync(stub.addonsSocket, { throwIfNoEntry: false })?.ctimeMs;
    if (created !== undefined) socketAt.push(created);
  });
  const annotations = new Set<string>();
  const annotationPoll = setInterval(() => {
    const v = (kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as { metadata?: { annotations?: Record<string, string> } } | undefined)?.metadata?.annotations?.[RESTARTED_AT];
    if (v) annotations.add(v);
  }, 50);

  // The load: 32 callers, each its next call as soon as the last is answered.
  const byCode: Record<string, number> = {};
  let sent = 0;
  let answered = 0;
  let maxLatencyMs = 0;
  let lateCalls = 0;
  const ops: ((i: number) => Promise<Outcome<unknown>>)[] = [
    (i) => call(healer, healer.getVolumeHealth, { pvName: pvName(i) }, { deadlineMs: DEADLINE_MS }),
    (i) => call(healer, healer.healVolume, { pvName: pvName(i), mode: Mode.IF_ABNORMAL, reason: reasonFor(Mode.IF_ABNORMAL) }, { deadlineMs: DEADLINE_MS }),
    (i) => call(healer, healer.healVolume, { pvName: pvName(i), mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, { deadlineMs: DEADLINE_MS }),
    () => call(identity, identity.getCapabilities, {}, { deadlineMs: DEADLINE_MS }),
  ];
  const end = Date.now() + o.minutes * 60_000;
  let n = 0;
  const callers = Array.from({ length: CALLERS }, async () => {
    while (Date.now() < end) {
      const i = n++;
      sent++;
      const t0 = performance.now();
      const r = await ops[i % ops.length]!((i * 7919) % o.volumes);
      const ms = performance.now() - t0;
      answered++;
      maxLatencyMs = Math.max(maxLatencyMs, ms);
      if (ms > DEADLINE_MS + LATE_SLACK_MS) lateCalls++;
      const k = r.ok ? "OK" : codeName(r.code);
      byCode[k] = (byCode[k] ?? 0) + 1;
      // An unavailable sidecar answers at once: do not spin on it.
      if (!r.ok) await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });

  // The faults, on a schedule: a driver restart every restartEveryMs, an API outage half-way between.
  const reconnectMs: number[] = [];
  let driverRestarts = 0;
  let apiOutages = 0;
  const started = Date.now();
  const firstMinuteAt = started + Math.min(60_000, (o.minutes * 60_000) / 2);
  let rssAfterFirstMinute: number | undefined;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(ms, end - Date.now()))));
  const memoryCheck = (async () => {
    await sleep(firstMinuteAt - Date.now());
    rssAfterFirstMinute = readMemory(sidecar.pid).rssBytes;
  })();
  while (Date.now() + o.restartEveryMs / 2 < end) {
    await sleep(o.restartEveryMs / 2);
    if (Date.now() >= end) break;
    kube.faults.dropWatches();
    kube.faults.failNext(1_000_000_000, 500);
    apiOutages++;
    await sleep(o.outageMs);
    kube.faults.clear();
    await sleep(o.restartEveryMs / 2 - o.outageMs);
    if (Date.now() >= end) break;
    await stub.kill();
    const servedBefore = servingAt.length;
    const socketsBefore = socketAt.length;
    stub = await restartDriverStub(stub);
    driverRestarts++;
    const back = await waitUntil(() => (socketAt.length > socketsBefore ? socketAt.at(-1) : undefined), 10_000);
    const serving = await waitUntil(() => servingAt.slice(servedBefore).find((t) => t >= (back ?? 0)), 15_000);
    if (back !== undefined && serving !== undefined) {
      // Whole ms: the kernel stamps files from its coarse clock (a tick, 1-4 ms).
      reconnectMs.push(Math.round(serving - back));
      o.progress(`  restart ${driverRestarts}: back -> SERVING ${reconnectMs.at(-1)} ms; ${answered}/${sent} calls answered so far`);
    } else {
      const earlier = servingAt.slice(servedBefore).at(-1);
      const why = back === undefined ? "the socket not seen within 10 s" : `not SERVING within 15 s of the socket${earlier === undefined ? "" : ` (SERVING ${back - earlier} ms before the socket was seen)`}`;
      o.progress(`  restart ${driverRestarts}: ${why}; ${answered}/${sent} calls answered so far`);
    }
  }
  await Promise.all([...callers, memoryCheck]);
  const rssEnd = readMemory(sidecar.pid).rssBytes;
  // The last restart's annotation may still be on its way.
  await waitUntil(() => annotations.size >= driverRestarts || undefined, 10_000);
  clearInterval(annotationPoll);
  socketWatch.close();
  watchHealth.cancel();
  // The sidecar, the driver and the API are stopped by the bench's cleanup, like everything it starts.
  const rssFirst = rssAfterFirstMinute ?? rssEnd;
  return {
    minutes: o.minutes,
    callers: CALLERS,
    volumes: o.volumes,
    deadlineMs: DEADLINE_MS,
    sent,
    answered,
    byCode,
    maxLatencyMs,
    lateCalls,
    driverRestarts,
    restartAnnotations: annotations.size,
    apiOutages,
    reconnectMs,
    rssAfterFirstMinuteBytes: rssFirst,
    rssEndBytes: rssEnd,
    rssGrowth: rssEnd / rssFirst - 1,
  };
}

async function waitUntil<T>(probe: () => T | undefined, timeoutMs: number): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined || Date.now() > deadline) return v;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

// `npm run bench [-- --quick] [-- --cluster] [-- --out FILE] [-- --soak-minutes N] [-- --restart-runs N]`: what the sidecar costs,
// measured in one run on the machine it runs on, printed as tables (stdout; progress goes to
// stderr) and written as JSON.
//   1. relay overhead: GetVolumeHealth direct to the driver vs through the sidecar, at 1 and 64
//      callers, then the API requests of a repeated check (repeated.ts)
//   2. heal-all burst: every volume of a node healed at once through --max-inflight 32
//   3. the sidecar's memory (idle, peak in the burst) and its start-up time
//   4. sustained overload: callers looping on slow heals, under deploy/'s memory settings
//   5. soak (soak.ts): mixed calls through driver restarts and API outages
//   headline (restart.ts, run first): time to heal after a node-plugin restart through the healer
//      controller — 500 volumes on one node, and 20 nodes x 50 volumes — against the floor
//   6. a cluster (cluster.ts, run last; alone with --cluster): the node plugin's DaemonSet upgraded
//      over 1000 nodes and 50 000 volumes, and a real sidecar in a cluster of 1 000 vs 50 000 PVs
// and last the sidecar's targets table (report-targets.ts). The programs run compiled, as in the
// image: the sidecar as its bundle under deploy/'s V8 flags (image.ts), the controller and the
// driver-stub from dist/; the driver-stub and the in-memory Kubernetes API run as processes of
// their own. Not part of `npm test` (only --quick is,
// as a smoke test that asserts nothing about speed).
import { spawnSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, release, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { startDriverStub, type DriverStub } from "../support/driver-stub.js";
import { call, codeName, type Outcome } from "../support/grpc.js";
import { repoRoot } from "../support/proc.js";
import { benchDir } from "./work-dir.js";
import { FlagError, parseFlags, usage, type FlagSpec } from "../../common/config/flags.js";
import { RELAY_KINDS, startRelay, type Relay, type RelayKind } from "./relays.js";
import { VolumeHealerNodeClient, nodeHealVolumeResponse_ResultToJSON as resultName } from "../../proto/gen/healer/v1/healer.js";
import { HealVolumeRequest_Mode as Mode, VolumeHealerClient } from "../../proto/gen/sidecar/v1/healer.js";
import { Cleanup, spawnSidecar, type LogLine, type SidecarProcess } from "../demo/processes.js";
import { COMPILED_CONTROLLER, COMPILED_DRIVER_STUB, COMPILED_SIDECAR, ensureCompiled } from "./build.js";
import { requestTotal, startKubeChild, type KubeChild } from "./kube.js";
import { maxOverlap, runLoad, summarize, timedLoad, turns, type TimedLoad } from "./load.js";
import { readCpuMs, readMemory, sampleMemory } from "./memory.js";
import { overloadEnv, sustainedOverload } from "./overload.js";
import { renderTables, type Results, type Startup } from "./report.js";
import { IMAGE_ENTRY_SCRIPT } from "./image.js";
import { renderTargets } from "./report-targets.js";
import { repeatedCheckCost } from "./repeated.js";
import { soak } from "./soak.js";
import type { RestartResults } from "./report-restart.js";
import { medianRun, restartHeal, type RestartResult } from "./restart.js";
import { queueAtScale } from "./queue-scale.js";
import { controllerAtScale } from "./controller-scale.js";
import { clusterRollout } from "./cluster.js";
import { renderCluster, type ClusterResults } from "./report-cluster.js";
import { medianOfRuns, sidecarsSideBySide, type SidecarAtSize } from "./sidecar-scale.js";
import { directHealRequest, directHealthRequest, pvName, stubState } from "./volumes.js";
import { reasonFor } from "../support/heal-request.js";

/** The bench's flags, parsed as the programs parse theirs (common/config/flags.ts). */
const FLAGS: FlagSpec[] = [
  { name: "quick", kind: "bool", help: "small counts: runs in seconds, for checking that the bench still works (numbers mean little)" },
  { name: "cluster", kind: "bool", help: "only section 6, the cluster (written to bench/results-cluster.json unless --out says otherwise)" },
  { name: "soak-minutes", kind: "string", help: "length of the soak (default 2, with --quick 0.2)" },
  {
    name: "restart-runs",
    kind: "string",
    help: "runs of each headline case (default 3, with --quick 1): the median run is reported, with every run's ratio and how many met the target beside it",
  },
  { name: "out", kind: "string", help: "where to write the JSON results (default bench/results.json, with --quick bench/results-quick.json)" },
  { name: "help", kind: "bool", help: "this text" },
  { name: "h", kind: "bool", help: "the same as --help" },
];
const USAGE = `usage: npm run bench [-- --quick] [-- --cluster] [-- --out FILE] [-- --soak-minutes N] [-- --restart-runs N]\n${usage(FLAGS)}\n`;

const FULL = {
  volumes: 1000,
  burst: 1000,
  calls: { 1: 2_000, 64: 20_000 },
  relayRounds: 4,
  warmup: 200,
  overload: { callers: 1000, seconds: 30, healDelayMs: 1000 },
  soakMinutes: 2,
  soak: { restartEveryMs: 20_000, outageMs: 3_000 },
  restart: { oneNode: { nodes: 1, volumesPerNode: 500 }, fleet: { nodes: 20, volumesPerNode: 50 } },
  restartRuns: 3,
  queueScale: { nodes: 1000, volumesPerNode: 50 },
  controllerScale: { nodes: 1000, volumesPerNode: 50 },
  starts: 7,
  cluster: {
    rollout: { fleet: { nodes: 1000, volumesPerNode: 50 }, healMs: 2000, checkMs: 20, perNodeConcurrency: 8, waveFraction: 0.1, waveGapMs: 15_000, realNodes: 3 },
    sidecar: { pvs: [1000, 50_000], volumesPerNode: 50, changesPerSecond: 10, windowMs: 60_000, checkEveryMs: 5_000 },
  },
};
const QUICK: Size = {
  volumes: 64,
  burst: 64,
  calls: { 1: 30, 64: 128 },
  relayRounds: 2,
  warmup: 10,
  overload: { callers: 64, seconds: 3, healDelayMs: 200 },
  soakMinutes: 0.2,
  soak: { restartEveryMs: 5_000, outageMs: 1_000 },
  restart: { oneNode: { nodes: 1, volumesPerNode: 40 }, fleet: { nodes: 3, volumesPerNode: 10 } },
  restartRuns: 1,
  queueScale: { nodes: 100, volumesPerNode: 50 },
  controllerScale: { nodes: 20, volumesPerNode: 50 },
  starts: 2,
  cluster: {
    rollout: { fleet: { nodes: 20, volumesPerNode: 10 }, healMs: 500, checkMs: 5, perNodeConcurrency: 8, waveFraction: 0.5, waveGapMs: 2_000, realNodes: 2 },
    sidecar: { pvs: [100, 500], volumesPerNode: 10, changesPerSecond: 10, windowMs: 2_000, checkEveryMs: 1_000 },
  },
};
/** The healer controller's own defaults, kept by the floor too. */
const CONTROLLER_BOUNDS = { perNodeConcurrency: 8, maxConcurrentHeals: 2048 };
const CONCURRENCY = [1, 64] as const;
const HEAL_DELAY_MS = 5;
const MAX_INFLIGHT = 32;

interface Options {
  quick: boolean;
  cluster: boolean;
  out: string;
  soakMinutes: number | undefined;
  restartRuns: number | undefined;
}

/** The options; for --help, or a bad flag or value (exit 2 with the reason and the usage), exits. */
function parseArgs(argv: string[]): Options {
  const refuse = (why: string): never => {
    process.stderr.write(`bench: ${why}\n${USAGE}`);
    process.exit(2);
  };
  let flags = new Map<string, string>();
  try {
    flags = parseFlags(FLAGS, argv, {});
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    refuse(err.message);
  }
  if (flags.get("help") === "true" || flags.get("h") === "true") {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const quick = flags.get("quick") === "true";
  const number = (name: string) => (flags.has(name) ? Number(flags.get(name)) : undefined);
  const soakMinutes = number("soak-minutes");
  if (soakMinutes !== undefined && !(soakMinutes > 0)) refuse("--soak-minutes must be a positive number");
  const restartRuns = number("restart-runs");
  if (restartRuns !== undefined && !(Number.isInteger(restartRuns) && restartRuns >= 1)) refuse("--restart-runs must be a whole number of at least 1");
  const cluster = flags.get("cluster") === "true";
  const out = flags.get("out") || `bench/results${cluster ? "-cluster" : ""}${quick ? "-quick" : ""}.json`;
  return { quick, cluster, out: resolve(repoRoot, out), soakMinutes, restartRuns };
}

const progress = (line: string) => process.stderr.write(`bench: ${line}\n`);
const cleanup = new Cleanup();

/** Start-up times from the sidecar's own log timestamps (and our clock at the spawn). */
function startup(s: SidecarProcess): Startup {
  const at = (message: string, lines: LogLine[]) => {
    const line = lines.find((l) => l.message === message);
    if (!line) throw new Error(`no "${message}" line in ${s.logFile}`);
    return Date.parse(line.timestamp);
  };
  const lines = s.logLines();
  const serving = at("ready: SERVING", lines);
  return {
    processStartToServingMs: serving - s.spawnedAt,
    processStartToFirstLogMs: at("starting csi-addons-sidecar", lines) - s.spawnedAt,
    driverReadyToServingMs: serving - at("driver ready", lines),
  };
}

async function startSidecar(stack: Stack, name: string, args: string[], env?: NodeJS.ProcessEnv, build: "compiled" | "image" = "compiled"): Promise<{ sidecar: SidecarProcess; client: VolumeHealerClient }> {
  if (cleanup.interrupted) throw new Error("interrupted");
  const sidecar = await spawnSidecar({ build, driverSocket: stack.stub.addonsSocket, kubeconfig: stack.kube.kubeconfig, logFile: join(stack.dir, `${name}.log`), args, env });
  cleanup.add(`sidecar (${name})`, () => sidecar.stop());
  progress(`  ${name}: pid ${sidecar.pid}, log ${sidecar.logFile}`);
  await sidecar.waitReadyz(200);
  const client = new VolumeHealerClient(sidecar.address, grpc.credentials.createInsecure());
  cleanup.add(`client of ${name}`, () => client.close());
  return { sidecar, client };
}

interface Stack {
  dir: string;
  kube: KubeChild;
  stub: DriverStub;
  /** healer.v1 straight to the driver's socket, as the sidecar itself talks to it. */
  direct: VolumeHealerNodeClient;
}

type Size = typeof FULL;

/**
 * The headline: both restart cases, one after the other, each run `size.restartRuns` times in a
 * directory of its own; the run with the median ratio is reported, every run's ratio beside it.
 * One run's ratio on a 2-core machine moves by a fifth either way (docs/performance.md, "Reading the numbers"):
 * a single run would say more about the minute it ran in than about the healer.
 */
async function restartHeals(dir: string, size: Size): Promise<RestartResults> {
  const run = async (key: keyof RestartResults, title: string) => {
    const fleet = size.restart[key];
    const runs: RestartResult[] = [];
    for (let i = 1; i <= size.restartRuns; i++) {
      const caseDir = join(dir, `${key}-${i}`);
      mkdirSync(caseDir);
      progress(`headline ${key === "oneNode" ? "1" : "2"}/2, run ${i} of ${size.restartRuns}: ${title}: ${fleet.nodes} node(s) x ${fleet.volumesPerNode} volumes, heal delay ${HEAL_DELAY_MS} ms`);
      runs.push(await restartHeal({ title, fleet, healDelayMs: HEAL_DELAY_MS, ...CONTROLLER_BOUNDS }, { dir: caseDir, cleanup, progress }));
    }
    return medianRun(runs);
  };
  return { oneNode: await run("oneNode", "one node"), fleet: await run("fleet", "a fleet of nodes") };
}

/**
 * 1. Relay overhead. Every caller asks about its own volume, so the sidecar's single flight never
 * merges calls and --max-inflight 64 never queues them: what is measured is the relay itself
 * (two Kubernetes reads, the driver call, two gRPC hops instead of one). Beside it, the same
 * driver calls through two relays that do nothing a sidecar must: bare-relay.ts (one Node hop,
 * bytes forwarded) and grpc-js-relay.ts (one hop through the decided stack's server and driver
 * client, messages left as bytes): what a hop costs by itself on the same machine, and what the stack
 * adds to it, against which the sidecar's targets can be read.
 */
async function relayOverhead(
  stack: Stack,
  size: Size,
): Promise<{ relay: Results["relay"]; startup: Startup; repeated: Results["repeatedCheck"]; idleRssBytes: Record<RelayKind, number> }> {
  progress("1/5 relay overhead: GetVolumeHealth, direct vs through the sidecar vs through a bare node:http2 relay and a grpc-js relay");
  stack.stub.setState(stubState(size.volumes, { state: "HEALTHY" }));
  const { sidecar, client } = await startSidecar(stack, "sidecar-relay", ["--max-inflight=64", "--max-queue=1024"]);
  const relays = {} as Record<RelayKind, { relay: Relay; client: VolumeHealerNodeClient }>;
  for (const kind of RELAY_KINDS) {
    const relay = await startRelay(kind, stack.stub.addonsSocket);
    cleanup.add(`${kind} relay`, () => relay.stop());
    progress(`  ${kind} relay pid ${relay.pid} at ${relay.address}`);
    const client = new VolumeHealerNodeClient(relay.address, grpc.credentials.createInsecure());
    cleanup.add(`${kind} relay client`, () => client.close());
    relays[kind] = { relay, client };
  }
  const viaRelay = (kind: RelayKind) => ({
    pid: relays[kind].relay.pid,
    send: (worker: number) => call(relays[kind].client, relays[kind].client.nodeGetVolumeHealth, directHealthRequest(worker)),
  });
  type Path = "direct" | "sidecar" | RelayKind;
  const paths: Record<Path, { pid: number | undefined; send: (worker: number) => Promise<Outcome<unknown>> }> = {
    direct: { pid: undefined, send: (worker) => call(stack.direct, stack.direct.nodeGetVolumeHealth, directHealthRequest(worker)) },
    sidecar: { pid: sidecar.pid, send: (worker) => call(client, client.getVolumeHealth, { pvName: pvName(worker) }) },
    bare: viaRelay("bare"),
    grpcJs: viaRelay("grpcJs"),
  };
  const names = Object.keys(paths) as Path[];
  // As the sidecar's idle RSS is taken: connected to the driver, one call made.
  const idleRssBytes = {} as Record<RelayKind, number>;
  for (const kind of RELAY_KINDS) {
    const first = await paths[kind].send(0);
    if (!first.ok) throw new Error(`the ${kind} relay's first call failed: ${codeName(first.code)} ${first.details}`);
    idleRssBytes[kind] = readMemory(relays[kind].relay.pid).rssBytes;
  }
  const relay: Results["relay"] = [];
  for (const c of CONCURRENCY) {
    for (const name of names) await runLoad(c, Math.min(size.warmup, size.calls[c]), paths[name].send);
    // A shared machine's speed moves from one minute to the next (docs/performance.md measured a
    // direct p50 of 0.3 ms in one, 0.7 in the next): the paths take turns, each round in another
    // order, and each path's rounds are pooled, so that every ratio compares calls made in the same
    // minutes.
    const runs: Record<Path, TimedLoad[]> = { direct: [], sidecar: [], bare: [], grpcJs: [] };
    const cpuMs: Record<Path, number> = { direct: 0, sidecar: 0, bare: 0, grpcJs: 0 };
    const perRound = Math.ceil(size.calls[c] / size.relayRounds);
    for (const round of turns(names, size.relayRounds)) {
      for (const name of round) {
        const { pid, send } = paths[name];
        const cpu0 = pid === undefined ? 0 : readCpuMs(pid);
        runs[name].push(await timedLoad(c, perRound, send));
        if (pid !== undefined) cpuMs[name] += readCpuMs(pid) - cpu0;
      }
    }
    const row = { direct: summarize(c, runs.direct), sidecar: summarize(c, runs.sidecar), bare: summarize(c, runs.bare), grpcJs: summarize(c, runs.grpcJs) };
    const perCall = (name: Exclude<Path, "direct">) => (cpuMs[name] * 1000) / row[name].calls;
    const cpuUsPerCall = { sidecar: perCall("sidecar"), bare: perCall("bare"), grpcJs: perCall("grpcJs") };
    progress(
      `  ${c} at once: p50 direct ${row.direct.p50Ms.toFixed(2)} ms, through the sidecar ${row.sidecar.p50Ms.toFixed(2)} ms, the bare relay ${row.bare.p50Ms.toFixed(2)} ms, the grpc-js relay ${row.grpcJs.p50Ms.toFixed(2)} ms`,
    );
    relay.push({ concurrency: c, rounds: size.relayRounds, ...row, cpuUsPerCall });
  }
  const started = startup(sidecar);
  const repeated = await repeatedCheckCost(stack.kube, client, Math.min(64, size.volumes));
  for (const { relay, client } of Object.values(relays)) {
    client.close();
    await relay.stop();
  }
  await sidecar.stop();
  return { relay, startup: started, repeated, idleRssBytes };
}

/**
 * 3 (start-up). Sidecars started one after the other against the idle stack (the driver up, no
 * calls), each stopped once SERVING: the median start, not one start that happened to share the
 * two cores with whatever else was running at that moment.
 */
async function startups(stack: Stack, size: Size): Promise<Results["startup"]["repeated"]> {
  progress(`  start-up: ${size.starts} sidecars started one after the other, the driver up, nothing else running`);
  stack.stub.setState(stubState(size.volumes, { state: "HEALTHY" }));
  const all: Startup[] = [];
  for (let i = 1; i <= size.starts; i++) {
    const { sidecar, client } = await startSidecar(stack, `sidecar-start-${i}`, []);
    all.push(startup(sidecar));
    client.close();
    await sidecar.stop();
  }
  const median = (key: keyof Startup) => {
    const sorted = all.map((st) => st[key]).sort((a, b) => a - b);
    return sorted[Math.floor((sorted.length - 1) / 2)]!;
  };
  return {
    starts: all.length,
    median: { processStartToServingMs: median("processStartToServingMs"), processStartToFirstLogMs: median("processStartToFirstLogMs"), driverReadyToServingMs: median("driverReadyToServingMs") },
    all,
  };
}

/** The burst's volumes, every one ABNORMAL, each heal holding the driver HEAL_DELAY_MS. */
const breakVolumes = (stub: DriverStub, volumes: number) =>
  stub.setState(stubState(volumes, { state: "ABNORMAL", reason: "TransportEndpointNotConnected", delayMs: HEAL_DELAY_MS }));

/** The driver's NodeHealVolume calls that started at or after `t` (its call log). */
const healsSince = (stub: DriverStub, t: number) => (stub.calls({ method: "NodeHealVolume" }) as unknown as { t0: number; t1: number }[]).filter((e) => e.t0 >= t);

function expectAllHealed(stub: DriverStub, volumes: number, what: string): void {
  const healed = Object.values(stub.readState().volumes ?? {}).filter((v) => v.state === "HEALTHY").length;
  if (healed !== volumes) throw new Error(`${what}: ${healed} of ${volumes} volumes healed`);
}

/**
 * 2 and 3. Heal-all burst: every volume ABNORMAL, each heal holds the driver HEAL_DELAY_MS; first
 * the driver alone at MAX_INFLIGHT calls at once (the floor), then all volumes at once through a
 * fresh sidecar whose memory is sampled meanwhile.
 */
async function healAllBurst(stack: Stack, size: Size): Promise<{ burst: Results["burst"]; memory: Omit<Results["memory"], "bareRelayIdleRssBytes" | "grpcJsRelayIdleRssBytes">; startup: Startup }> {
  progress(`2/5 heal-all burst: ${size.burst} volumes, heal delay ${HEAL_DELAY_MS} ms, --max-inflight ${MAX_INFLIGHT}`);
  const { stub, direct, kube } = stack;
  const breakAll = () => breakVolumes(stub, size.burst);
  breakAll();
  const { sidecar, client } = await startSidecar(stack, "sidecar-burst", [`--max-inflight=${MAX_INFLIGHT}`, `--max-queue=${size.burst}`]);

  let since = Date.now();
  const floor = await runLoad(MAX_INFLIGHT, size.burst, (_w, i) => call(direct, direct.nodeHealVolume, directHealRequest(i)));
  const floorPeak = maxOverlap(healsSince(stub, since));
  expectAllHealed(stub, size.burst, "direct heals");
  breakAll();

  progress("3/5 the sidecar's memory during the burst");
  const idle = readMemory(sidecar.pid);
  await kube.reset();
  /** Every volume's HealVolume(ALWAYS) at once; all must come back HEALED. */
  const healAll = async (what: string) => {
    const t0 = performance.now();
    const answers = await Promise.all(
      Array.from({ length: size.burst }, (_, i) => call(client, client.healVolume, { pvName: pvName(i), mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, { deadlineMs: 120_000 })),
    );
    const wallMs = performance.now() - t0;
    const outcomes: Record<string, number> = {};
    for (const a of answers) {
      const k = a.ok ? resultName(a.value.result) : codeName(a.code);
      outcomes[k] = (outcomes[k] ?? 0) + 1;
    }
    if (outcomes["HEALED"] !== size.burst) throw new Error(`${what}: ${JSON.stringify(outcomes)}, expected ${size.burst} HEALED`);
    return { wallMs, outcomes };
  };
  const sampler = sampleMemory(sidecar.pid);
  since = Date.now();
  const { wallMs, outcomes } = await healAll("burst through the sidecar");
  const mem = sampler.stop();
  const apiRequests = await kube.counters();
  const peakDriverCalls = maxOverlap(healsSince(stub, since));
  // The same burst once more through the same sidecar: what a long-running one does (its code
  // compiled and optimised by V8, the PVs in its cache), beside the fresh one above, which pays
  // V8's warm-up on these very calls while the driver-alone floor runs warm.
  breakAll();
  await kube.reset();
  const again = await healAll("second burst through the sidecar");
  const againRequests = requestTotal(await kube.counters());
  const grpcJs = await burstThroughGrpcJsRelay(stub, size);
  return {
    burst: {
      volumes: size.burst,
      healDelayMs: HEAL_DELAY_MS,
      maxInflight: MAX_INFLIGHT,
      maxQueue: size.burst,
      idealMs: (size.burst * HEAL_DELAY_MS) / MAX_INFLIGHT,
      direct: { wallMs: floor.wallMs, peakDriverCalls: floorPeak },
      sidecar: { wallMs, peakDriverCalls, outcomes },
      again: { wallMs: again.wallMs, apiRequestsPerHeal: againRequests / size.burst },
      grpcJs,
      apiRequests,
      apiRequestsPerHeal: requestTotal(apiRequests) / size.burst,
    },
    memory: { idleRssBytes: idle.rssBytes, peakRssBytes: mem.peakRssBytes, hwmBytes: mem.hwmBytes, samples: mem.samples },
    startup: startup(sidecar),
  };
}

/**
 * The same burst, the same heals of every volume at once, through a fresh grpc-js relay with the
 * sidecar's --max-inflight (grpc-js-relay.ts: the decided stack relaying bytes, the calls past the
 * limit queued): what the burst's time and peak memory are before a sidecar does anything of its own.
 */
async function burstThroughGrpcJsRelay(stub: DriverStub, size: Size): Promise<Results["burst"]["grpcJs"]> {
  const relay = await startRelay("grpcJs", stub.addonsSocket, MAX_INFLIGHT);
  cleanup.add("grpc-js relay (burst)", () => relay.stop());
  progress(`  the same burst through a grpc-js relay, --max-inflight ${MAX_INFLIGHT}: pid ${relay.pid} at ${relay.address}`);
  const client = new VolumeHealerNodeClient(relay.address, grpc.credentials.createInsecure());
  try {
    breakVolumes(stub, size.burst);
    const sampler = sampleMemory(relay.pid);
    const since = Date.now();
    // Every heal at once (one caller each); a call that fails fails the bench.
    const { wallMs } = await timedLoad(size.burst, size.burst, (_w, i) => call(client, client.nodeHealVolume, directHealRequest(i), { deadlineMs: 120_000 }));
    const mem = sampler.stop();
    expectAllHealed(stub, size.burst, "burst through the grpc-js relay");
    return { wallMs, peakRssBytes: mem.peakRssBytes, peakDriverCalls: maxOverlap(healsSince(stub, since)) };
  } finally {
    client.close();
    await relay.stop();
  }
}

/**
 * 4. Sustained overload (overload.ts says what must hold), twice: with deploy/'s NODE_OPTIONS, then
 * as the image starts the sidecar in a pod that sets none (its ENTRYPOINT script, no NODE_OPTIONS at
 * all): both within deploy/'s memory limit.
 */
async function overload(stack: Stack, size: Size): Promise<Pick<Results, "overload" | "overloadImage">> {
  const o = size.overload;
  progress(`4/5 sustained overload: ${o.callers} callers looping for ${o.seconds} s, heals of ${o.healDelayMs} ms, deploy/'s memory settings`);
  const { env, limits } = overloadEnv();
  const run = async (name: string, build: "compiled" | "image", runEnv: NodeJS.ProcessEnv, nodeOptions: string) => {
    stack.stub.setState(stubState(size.volumes, { state: "ABNORMAL", reason: "TransportEndpointNotConnected", delayMs: o.healDelayMs }));
    const { sidecar, client } = await startSidecar(stack, name, [], runEnv, build);
    client.close();
    const result = await sustainedOverload(sidecar, { ...limits, nodeOptions }, o, size.volumes);
    await sidecar.stop();
    return result;
  };
  progress(`  NODE_OPTIONS="${limits.nodeOptions}", memory limit ${limits.limit} (deploy/${limits.files.join(", deploy/")})`);
  const deployed = await run("sidecar-overload", "compiled", env, limits.nodeOptions);
  progress(`  again as the image starts it: node ${IMAGE_ENTRY_SCRIPT}, no NODE_OPTIONS at all`);
  const image = await run("sidecar-overload-image", "image", { NODE_OPTIONS: undefined }, "");
  return { overload: deployed, overloadImage: image };
}

const SIDECAR_ROUNDS = 3;

function writeResults(out: string, results: object): void {
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify(results, null, 2) + "\n");
  process.stdout.write(`\nresults written to ${out}\n`);
}

/** 6. The cluster: the rollout, then the same real sidecar in a small cluster and a large one. */
async function clusterSection(dir: string, size: Size): Promise<ClusterResults> {
  const { rollout, sidecar } = size.cluster;
  const caseDir = join(dir, "cluster");
  mkdirSync(caseDir);
  progress(`6/6 a cluster: ${rollout.fleet.nodes} nodes x ${rollout.fleet.volumesPerNode} volumes, the node plugin's DaemonSet upgraded`);
  const result = await clusterRollout(rollout, { dir: caseDir, cleanup, progress });
  progress(`  a real sidecar in a cluster of ${sidecar.pvs.join(" and of ")} PVs, ${sidecar.changesPerSecond} PV changes a second elsewhere`);
  // Both sizes side by side, over the same window, three times; of each size the median of each
  // figure. A minute of a mostly idle sidecar is well under a second of CPU, and what else the
  // machine does moves that by a fifth from one minute to the next: taking turns, the two sizes
  // came out up to 7 % apart, either way. Side by side they share it; one run's GC still moves
  // its peak RSS.
  const runs: SidecarAtSize[] = [];
  for (let round = 0; round < SIDECAR_ROUNDS; round++) runs.push(...(await sidecarsSideBySide(sidecar, sidecar.pvs, { dir: join(caseDir, `round-${round}`), cleanup, progress })));
  return {
    rollout: result,
    sidecar: {
      small: medianOfRuns(runs.filter((r) => r.pvs === sidecar.pvs[0])),
      large: medianOfRuns(runs.filter((r) => r.pvs === sidecar.pvs[1])),
      runs,
      changesPerSecond: sidecar.changesPerSecond,
      windowMs: sidecar.windowMs,
    },
  };
}

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  const base = opts.quick ? QUICK : FULL;
  const size = opts.restartRuns === undefined ? base : { ...base, restartRuns: opts.restartRuns };
  const loadAtStart = loadavg()[0]!;
  cleanup.onSignal(progress);
  const build = ensureCompiled(progress, [COMPILED_SIDECAR, COMPILED_DRIVER_STUB, COMPILED_CONTROLLER]);
  progress(build);
  const dir = benchDir("csi-healer-bench-");
  progress(`working directory ${dir}`);
  let ok = false;
  cleanup.add("temporary directory", () => (ok ? rmSync(dir, { recursive: true, force: true }) : progress(`kept ${dir} (logs)`)));
  if (opts.cluster) {
    const cluster = await clusterSection(dir, size);
    ok = true;
    process.stdout.write(renderCluster(cluster) + "\n");
    writeResults(opts.out, { timestamp: new Date().toISOString(), mode: opts.quick ? "quick" : "full", git: gitDescribe(), cluster });
    return 0;
  }
  const restart = await restartHeals(dir, size);
  const { nodes, volumesPerNode } = size.queueScale;
  progress(`the controller's work queue: ${nodes} nodes x ${volumesPerNode} volumes queued at once`);
  const controllerQueue = await queueAtScale(nodes, volumesPerNode, { perNode: CONTROLLER_BOUNDS.perNodeConcurrency, global: CONTROLLER_BOUNDS.maxConcurrentHeals });
  const cs = size.controllerScale;
  progress(`the controller's informers at cluster scale: ${cs.nodes} nodes x ${cs.volumesPerNode} volumes, objects as a cluster writes them`);
  const controllerScale = await controllerAtScale(cs, { dir, cleanup });

  progress(`starting the in-memory Kubernetes API (${size.volumes} PVs and VolumeAttachments) and the driver-stub`);
  const kube = await startKubeChild({ seed: { volumes: size.volumes } });
  cleanup.add("in-memory Kubernetes API", () => kube.stop());
  const stub = await startDriverStub({ dir });
  cleanup.add("driver-stub", () => stub.stop());
  progress(`  in-memory Kubernetes API pid ${kube.pid}, driver-stub pid ${stub.proc.child.pid}`);
  const direct = new VolumeHealerNodeClient(`unix://${stub.addonsSocket}`, grpc.credentials.createInsecure());
  cleanup.add("direct client", () => direct.close());
  const stack: Stack = { dir, kube, stub, direct };

  const relay = await relayOverhead(stack, size);
  const started = await startups(stack, size);
  const burst = await healAllBurst(stack, size);
  const overloaded = await overload(stack, size);
  const soakMinutes = opts.soakMinutes ?? size.soakMinutes;
  progress(`5/5 soak: ${soakMinutes} min of mixed calls from 32 callers, driver restarts and API outages`);
  const soaked = await soak({ minutes: soakMinutes, ...size.soak, volumes: Math.min(size.volumes, 200), dir, cleanup, progress, args: [`--max-inflight=${MAX_INFLIGHT}`] });
  // Its own processes only: everything above is stopped first, so that the cluster has the machine.
  await kube.stop();
  await stub.stop();
  const cluster = await clusterSection(dir, size);
  const results: Results = {
    timestamp: new Date().toISOString(),
    mode: opts.quick ? "quick" : "full",
    node: process.version,
    machine: {
      platform: process.platform,
      arch: process.arch,
      kernel: release(),
      cpuModel: cpus()[0]?.model ?? "unknown",
      cpus: cpus().length,
      totalMemoryBytes: totalmem(),
      loadAverage1m: loadavg()[0]!,
      loadAverage1mAtStart: loadAtStart,
      workDir: dir,
    },
    git: gitDescribe(),
    sidecar: { entry: COMPILED_SIDECAR, build },
    relay: relay.relay,
    burst: burst.burst,
    memory: { ...burst.memory, bareRelayIdleRssBytes: relay.idleRssBytes.bare, grpcJsRelayIdleRssBytes: relay.idleRssBytes.grpcJs },
    startup: { relaySidecar: relay.startup, burstSidecar: burst.startup, repeated: started },
    ...overloaded,
    restartHeal: restart,
    controllerQueue,
    controllerScale,
    apiRequestsPerRepeatedCheck: relay.repeated.perHealthCheck,
    repeatedCheck: relay.repeated,
    reconnectMs: soaked.reconnectMs.length > 0 ? Math.max(...soaked.reconnectMs) : null,
    soak: soaked,
    cluster,
  };
  ok = true;
  process.stdout.write(renderTables(results) + "\n\n" + renderTargets(results) + "\n\n" + renderCluster(cluster) + "\n");
  writeResults(opts.out, results);
  return 0;
}

function gitDescribe(): { commit: string; dirty: boolean } | undefined {
  const rev = spawnSync("git", ["rev-parse", "HEAD"], { cwd: repoRoot, encoding: "utf8" });
  if (rev.status !== 0) return undefined;
  const status = spawnSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: repoRoot, encoding: "utf8" });
  return { commit: rev.stdout.trim(), dirty: status.stdout.trim() !== "" };
}

// After Ctrl-C the signal handler owns the exit (130, once everything is stopped).
cleanup.watch(main()).then(
  async (code) => {
    if (cleanup.interrupted) return;
    const failed = await cleanup.run();
    for (const f of failed) progress(`cleanup failed: ${f}`);
    process.exit(failed.length > 0 ? 1 : code);
  },
  async (err: unknown) => {
    if (cleanup.interrupted) return;
    progress(`FAILED: ${err instanceof Error ? err.message : String(err)}`);
    await cleanup.run();
    process.exit(1);
  },
);

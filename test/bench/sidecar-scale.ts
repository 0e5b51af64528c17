// A real sidecar's cost against the size of its cluster (cluster bench): the same node (50
// volumes, a driver-stub, the compiled sidecar under deploy/'s flags) in a cluster of `pvs` PVs,
// while PVs of other nodes change `changesPerSecond` times a second and the node's own volumes are
// checked every few seconds, as a healer controller's periodic pass and kubelet-side tools would.
// Measured over the window: the sidecar's RSS (peak of samples), CPU time, the watch events the
// API server sent it and the requests it made. A node-scoped sidecar costs the same in a cluster
// of 1 000 PVs and of 50 000; the two sizes run side by side, over the same window.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { VolumeHealerClient } from "../../proto/gen/sidecar/v1/healer.js";
import { spawnSidecar } from "../demo/processes.js";
import { startDriverStub } from "../support/driver-stub.js";
import { call } from "../support/grpc.js";
import { fleetNode, fleetPod, fleetPv, fleetStubState, type Fleet } from "./fleet.js";
import { requestTotal, startKubeChild } from "./kube.js";
import { readCpuMs, sampleMemory } from "./memory.js";
import { SIDECAR_USER, median, type RestartEnv } from "./restart.js";
import { delay } from "../../common/util/delay.js";

export interface SidecarScaleCase {
  volumesPerNode: number;
  changesPerSecond: number;
  windowMs: number;
  checkEveryMs: number;
}

export interface SidecarAtSize {
  pvs: number;
  peakRssBytes: number;
  cpuMs: number;
  watchEvents: number;
  requests: number;
  /** PV changes made elsewhere in the window. */
  changes: number;
  checks: number;
}

/** Checks of every volume before the window: the first compile the check path, later ones run it as measured. */
const WARM_ROUNDS = 3;

interface Prepared {
  measure(): Promise<SidecarAtSize>;
  stop(): Promise<void>;
}

/** The cluster seeded, the node's driver-stub and sidecar started, its volumes known and its code warm. */
async function prepare(c: SidecarScaleCase, pvs: number, env: RestartEnv): Promise<Prepared> {
  const fleet: Fleet = { nodes: Math.ceil(pvs / c.volumesPerNode), volumesPerNode: c.volumesPerNode };
  const dir = join(env.dir, `sidecar-${pvs}`);
  mkdirSync(dir, { recursive: true });
  const kube = await startKubeChild({ seed: { cluster: fleet }, identities: { sidecar: SIDECAR_USER } });
  env.cleanup.add(`in-memory Kubernetes API (${pvs} PVs)`, () => kube.stop());
  const stub = await startDriverStub({ dir, state: fleetStubState(fleet, 0, { state: "HEALTHY" }) });
  env.cleanup.add(`driver-stub (${pvs} PVs)`, () => stub.stop());
  const sidecar = await spawnSidecar({ build: "compiled", driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigs["sidecar"]!, logFile: join(dir, "sidecar.log"), node: fleetNode(0), pod: fleetPod(0) });
  env.cleanup.add(`sidecar (${pvs} PVs)`, () => sidecar.stop());
  await sidecar.waitReadyz(200, 60_000);
  const client = new VolumeHealerClient(sidecar.address, grpc.credentials.createInsecure());
  let checks = 0;
  const checkAll = async () => {
    for (let j = 0; j < c.volumesPerNode; j++) {
      const r = await call(client, client.getVolumeHealth, { pvName: fleetPv(0, j) });
      if (!r.ok) throw new Error(`GetVolumeHealth ${fleetPv(0, j)} through the sidecar: ${r.details}`);
      checks++;
    }
  };
  const stop = async () => {
    client.close();
    await sidecar.stop();
    await stub.stop();
    await kube.stop();
  };
  try {
    // Its volumes known, its caches warm and its check path compiled: the steady state is what is measured.
    for (let i = 0; i < WARM_ROUNDS; i++) await checkAll();
  } catch (err) {
    await stop();
    throw err;
  }
  const measure = async (): Promise<SidecarAtSize> => {
    checks = 0;
    await kube.reset();
    const cpu0 = readCpuMs(sidecar.pid);
    const memory = sampleMemory(sidecar.pid, 50);
    await kube.churn(c.changesPerSecond, [0], fleet);
    // The same work at each size: a fixed number of rounds, each a check of every volume, then a wait.
    for (let round = 0; round < Math.ceil(c.windowMs / c.checkEveryMs); round++) {
      await checkAll();
      await delay(c.checkEveryMs);
    }
    const changes = await kube.churn(0, [], fleet);
    const peak = memory.stop();
    const cpuMs = readCpuMs(sidecar.pid) - cpu0;
    const counts = await kube.countsByUser();
    const events = Object.values(counts.eventsByUser[SIDECAR_USER] ?? {}).reduce((n, v) => n + v, 0);
    env.progress(`  ${pvs} PVs in the cluster: ${changes} PV changes elsewhere, sidecar (pid ${sidecar.pid}) ${Math.round(cpuMs)} ms CPU, ${events} watch events received`);
    return { pvs, peakRssBytes: peak.peakRssBytes, cpuMs, watchEvents: events, requests: requestTotal(counts.byUser[SIDECAR_USER] ?? {}), changes, checks };
  };
  return { measure, stop };
}

/**
 * The sidecar in a cluster of each size, both measured over the same window: what else the machine
 * does then (a tenth of a second of CPU a minute, or more, from one minute to the next) falls on
 * both, and what is compared is the cluster's size alone.
 */
export async function sidecarsSideBySide(c: SidecarScaleCase, sizes: readonly number[], env: RestartEnv): Promise<SidecarAtSize[]> {
  const prepared: Prepared[] = [];
  try {
    for (const pvs of sizes) prepared.push(await prepare(c, pvs, env));
    return await Promise.all(prepared.map((p) => p.measure()));
  } finally {
    for (const p of prepared) await p.stop();
  }
}

/** Of runs at one size, the median of each figure. */
export function medianOfRuns(runs: SidecarAtSize[]): SidecarAtSize {
  const med = (f: (r: SidecarAtSize) => number) => median(runs.map(f));
  return {
    pvs: runs[0]!.pvs,
    peakRssBytes: med((r) => r.peakRssBytes),
    cpuMs: med((r) => r.cpuMs),
    watchEvents: med((r) => r.watchEvents),
    requests: med((r) => r.requests),
    changes: med((r) => r.changes),
    checks: med((r) => r.checks),
  };
}

// A real sidecar's cost against the size of its cluster (cluster bench): the same node (50
// volumes, a driver-stub, the compiled sidecar under deploy/'s flags) in a cluster of `pvs` PVs,
// while PVs of other nodes change `changesPerSecond` times a second and the node's own volumes are
// checked every few seconds, as a healer controller's periodic pass and kubelet-side tools would.
// Measured over the window: the sidecar's RSS (peak of samples), CPU time, the watch events the
// API server sent it and the requests it made. A node-scoped sidecar costs the same in a cluster
// of 1 000 PVs and of 50 000.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { VolumeHealerClient } from "../../proto/gen/sidecar/v1/healer.js";
import { spawnSidecar, type Cleanup } from "../demo/processes.js";
import { startDriverStub } from "../support/driver-stub.js";
import { call } from "../support/grpc.js";
import { fleetNode, fleetPod, fleetPv, fleetStubState, type Fleet } from "./fleet.js";
import { requestTotal, startKubeChild } from "./kube.js";
import { readCpuMs, sampleMemory } from "./memory.js";
import { SIDECAR_USER } from "./restart.js";

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function sidecarAtSize(c: SidecarScaleCase, pvs: number, env: { dir: string; cleanup: Cleanup; progress: (l: string) => void }): Promise<SidecarAtSize> {
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
  try {
    await checkAll(); // its volumes known, its caches warm: the steady state is what is measured
    checks = 0;
    await kube.reset();
    const cpu0 = readCpuMs(sidecar.pid);
    const memory = sampleMemory(sidecar.pid, 50);
    await kube.churn(c.changesPerSecond, [0], fleet);
    // The same work at each size: a fixed number of rounds, each a check of every volume, then a wait.
    for (let round = 0; round < Math.ceil(c.windowMs / c.checkEveryMs); round++) {
      await checkAll();
      await sleep(c.checkEveryMs);
    }
    const changes = await kube.churn(0, [], fleet);
    const peak = memory.stop();
    const cpuMs = readCpuMs(sidecar.pid) - cpu0;
    const counts = await kube.countsByUser();
    const events = Object.values(counts.eventsByUser[SIDECAR_USER] ?? {}).reduce((n, v) => n + v, 0);
    env.progress(`  ${pvs} PVs in the cluster: ${changes} PV changes elsewhere, sidecar ${Math.round(cpuMs)} ms CPU, ${events} watch events received`);
    return { pvs, peakRssBytes: peak.peakRssBytes, cpuMs, watchEvents: events, requests: requestTotal(counts.byUser[SIDECAR_USER] ?? {}), changes, checks };
  } finally {
    client.close();
    await sidecar.stop();
    await stub.stop();
    await kube.stop();
  }
}

// The healer controller at cluster scale: what its informers hold of a large cluster. The in-memory
// API is seeded with a fleet's Nodes, PVs and VolumeAttachments as a provisioner, an attacher and
// the kubelets write them (fleetSeed's asWritten); the compiled controller starts under deploy/'s
// V8 flags, lists everything (its "controller started" line comes once every informer has), and
// its memory is read from /proc right then: RSS, the high-water mark of the first lists, and the
// V8 heap in use (its /metrics). By that line every listed object has been through the informers'
// handlers (they run as each list is taken in); RSS read 2, 5, 10 and 20 s later did not move.
// No CSIAddonsNode exists, so no heal runs: this is the cache.
import { join } from "node:path";
import { CONTROLLER_USER, spawnController } from "../demo/controller-process.js";
import type { Cleanup } from "../demo/processes.js";
import { readDeployLimits } from "./deploy-limits.js";
import type { Fleet } from "./fleet.js";
import { startKubeChild } from "./kube.js";
import { readMemory } from "./memory.js";

export interface ControllerScale extends Fleet {
  /** The controller's first log line to "controller started" (the informers' first lists). */
  syncMs: number;
  rssBytes: number;
  hwmBytes: number;
  heapUsedBytes: number;
  /** deploy/'s settings for the controller container. */
  nodeOptions: string;
  limit: string;
  limitBytes: number;
}

export async function controllerAtScale(fleet: Fleet, env: { dir: string; cleanup: Cleanup }): Promise<ControllerScale> {
  const kube = await startKubeChild({ seed: { fleet, asWritten: true }, identities: { controller: CONTROLLER_USER } });
  env.cleanup.add("in-memory Kubernetes API (controller at scale)", () => kube.stop());
  try {
    const controller = await spawnController({ build: "compiled", kubeconfig: kube.kubeconfigs["controller"]!, logFile: join(env.dir, "controller-scale.log"), args: ["--check-interval=1h"] });
    env.cleanup.add("healer controller (at scale)", () => controller.stop());
    try {
      const lines = controller.logLines();
      const syncMs = Date.parse(controller.started.timestamp) - Date.parse(lines[0]!.timestamp);
      const mem = readMemory(controller.pid);
      const heapUsed = /^nodejs_heap_size_used_bytes (\S+)$/m.exec(await controller.metrics());
      if (!heapUsed) throw new Error("the controller's /metrics has no nodejs_heap_size_used_bytes");
      const limits = readDeployLimits("controller");
      return { ...fleet, syncMs, ...mem, heapUsedBytes: Number(heapUsed[1]), nodeOptions: limits.nodeOptions, limit: limits.limit, limitBytes: limits.limitBytes };
    } finally {
      await controller.stop();
    }
  } finally {
    await kube.stop();
  }
}

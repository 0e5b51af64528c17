// The healer controller's work queue at cluster scale. A controller that starts, or takes over as
// leader, queues a first-sight check of every volume of every node; the sidecars answer slower
// than the passes queue them, so nearly all of them wait in the queue at once. Modelled here: each
// node's volumes queued in a turn of the event loop of their own (as each node's pass queues them)
// while the first calls are not answered yet; then every call is answered in the turn after it
// started. What is measured is the queue itself: the time until everything ran, and the longest
// the event loop was held meanwhile, in this process.
import { monitorEventLoopDelay } from "node:perf_hooks";
import { WorkQueue } from "../../controller/heal/queue.js";

export interface QueueScale {
  nodes: number;
  volumesPerNode: number;
  bounds: { perNode: number; global: number };
  wallMs: number;
  /** The longest event-loop delay seen meanwhile. */
  maxStallMs: number;
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export async function queueAtScale(nodes: number, volumesPerNode: number, bounds: QueueScale["bounds"]): Promise<QueueScale> {
  const q = new WorkQueue(bounds);
  const total = nodes * volumesPerNode;
  let ran = 0;
  let allRan!: () => void;
  const done = new Promise<void>((resolve) => (allRan = resolve));
  let answer!: () => void;
  const answering = new Promise<void>((resolve) => (answer = resolve));
  const run = async () => {
    await answering;
    await nextTurn();
    if (++ran === total) allRan();
  };
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const t0 = performance.now();
  for (let n = 0; n < nodes; n++) {
    await nextTurn();
    for (let j = 0; j < volumesPerNode; j++) q.add({ nodeKey: `node-${n}`, priority: 1, generation: 1, run, dropped: () => {} });
  }
  answer();
  await done;
  const wallMs = performance.now() - t0;
  loop.disable();
  return { nodes, volumesPerNode, bounds, wallMs, maxStallMs: loop.max / 1e6 };
}

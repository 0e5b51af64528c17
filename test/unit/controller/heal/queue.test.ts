// heal/queue: the work queue's bounds (per node, cluster-wide), priority and supersession.
import { test } from "node:test";
import assert from "node:assert/strict";
import { WorkQueue, type WorkItem } from "../../../../controller/heal/queue.js";
import { waitFor } from "../../../support/wait.js";

function deferredItem(nodeKey: string, priority: number, generation: number, log: string[], name: string) {
  let release!: () => void;
  const done = new Promise<void>((r) => (release = r));
  const item: WorkItem = {
    nodeKey,
    priority,
    generation,
    run: () => (log.push(`run ${name}`), done),
    dropped: () => log.push(`drop ${name}`),
  };
  return { item, release };
}

/**
 * The queue's rule stated the plain way: one list in arrival order; the next item is the first of
 * the best priority whose node has a free slot. The queue keeps per-node queues and a heap
 * instead, so that it never scans other nodes' items; it must choose exactly as this does.
 */
class ScannedQueue {
  private readonly queued: WorkItem[] = [];
  private readonly runningByNode = new Map<string, number>();
  private running = 0;
  constructor(private readonly bounds: { perNode: number; global: number }) {}
  add(item: WorkItem): void {
    this.queued.push(item);
    this.pump();
  }
  supersede(nodeKey: string, generation: number): number {
    const drop = this.queued.filter((i) => i.nodeKey === nodeKey && i.generation < generation);
    for (const i of drop) this.queued.splice(this.queued.indexOf(i), 1);
    for (const i of drop) i.dropped();
    return drop.length;
  }
  clear(): number {
    const drop = this.queued.splice(0);
    for (const i of drop) i.dropped();
    return drop.length;
  }
  private pump(): void {
    while (this.running < this.bounds.global) {
      const idx = this.queued.reduce<number>((best, item, i) => {
        if ((this.runningByNode.get(item.nodeKey) ?? 0) >= this.bounds.perNode) return best;
        return best < 0 || item.priority < this.queued[best]!.priority ? i : best;
      }, -1);
      if (idx < 0) return;
      const [item] = this.queued.splice(idx, 1);
      this.running++;
      this.runningByNode.set(item!.nodeKey, (this.runningByNode.get(item!.nodeKey) ?? 0) + 1);
      const finish = () => {
        this.running--;
        this.runningByNode.set(item!.nodeKey, this.runningByNode.get(item!.nodeKey)! - 1);
        this.pump();
      };
      item!.run().then(finish, finish);
    }
  }
}

test("queue: at most perNode calls to one sidecar and global in the cluster", async () => {
  const q = new WorkQueue({ perNode: 2, global: 3 });
  const log: string[] = [];
  const items = [..."abcde"].flatMap((n) => [deferredItem("A", 1, 1, log, `A${n}`), deferredItem("B", 1, 1, log, `B${n}`)]);
  for (const i of items) q.add(i.item);
  assert.deepEqual(log, ["run Aa", "run Ba", "run Ab"], "3 at once; A's third waits for a per-node slot");
  assert.equal(q.active, 3);
  items[0]!.release(); // Aa done
  await waitFor("the next item", () => log.length === 4);
  assert.equal(log[3], "run Bb", "B still has a free per-node slot and is oldest");
});

test("queue: restart work (priority 0) before periodic work, oldest first", async () => {
  const q = new WorkQueue({ perNode: 8, global: 1 });
  const log: string[] = [];
  const first = deferredItem("A", 1, 1, log, "p1");
  q.add(first.item);
  const rest = [deferredItem("A", 1, 1, log, "p2"), deferredItem("B", 0, 2, log, "r1"), deferredItem("A", 0, 3, log, "r2")];
  for (const r of rest) q.add(r.item);
  first.release();
  await waitFor("r1", () => log.includes("run r1"));
  rest[1]!.release();
  await waitFor("r2", () => log.includes("run r2"));
  rest[2]!.release();
  await waitFor("p2", () => log.includes("run p2"));
  assert.deepEqual(log, ["run p1", "run r1", "run r2", "run p2"]);
});

test("queue: a newer trigger drops that node's queued work of older generations only; the newer work still runs", async () => {
  const q = new WorkQueue({ perNode: 1, global: 1 });
  const log: string[] = [];
  const running = deferredItem("A", 1, 1, log, "A1-running");
  q.add(running.item);
  const queued = (
    [
      ["A", 1, "A1"],
      ["B", 1, "B1"],
      ["A", 2, "A2"],
    ] as const
  ).map(([node, gen, name]) => deferredItem(node, 1, gen, log, name));
  for (const d of queued) q.add(d.item);
  assert.equal(q.supersede("A", 2), 1);
  assert.deepEqual(log, ["run A1-running", "drop A1"], "the running call finishes; queued older work is dropped");
  assert.equal(q.size, 2);
  running.release();
  for (const d of queued) d.release();
  await waitFor("the kept work ran", () => log.includes("run B1") && log.includes("run A2"));
  await q.idle();
  assert.deepEqual(log, ["run A1-running", "drop A1", "run B1", "run A2"]);
});

test("queue: when the dropped item was its node's next, the newer work left behind it runs once a cluster-wide slot frees", async () => {
  // A has free per-node slots and waits only for the one global slot, which B holds: A's newer
  // item was queued behind A1 and never offered on its own, so dropping A1 must offer it.
  const q = new WorkQueue({ perNode: 2, global: 1 });
  const log: string[] = [];
  const b = deferredItem("B", 1, 1, log, "B1");
  q.add(b.item);
  const older = deferredItem("A", 1, 1, log, "A1");
  const newer = deferredItem("A", 1, 2, log, "A2");
  q.add(older.item);
  q.add(newer.item);
  assert.equal(q.supersede("A", 2), 1);
  b.release();
  await waitFor("A2 to run", () => log.includes("run A2"));
  newer.release();
  await q.idle();
  assert.deepEqual(log, ["run B1", "drop A1", "run A2"]);
});

test("queue: a node with nothing running or waiting is forgotten (after its last item, a supersession, clear()), so that nodes gone from the cluster leave nothing behind", async () => {
  // White-box: the per-node entries are private, and what they cost is memory, not behaviour.
  const q = new WorkQueue({ perNode: 1, global: 1 });
  const nodes = () => (q as unknown as { nodes: Map<string, unknown> }).nodes.size;
  const log: string[] = [];
  const a = deferredItem("A", 1, 1, log, "A1");
  q.add(a.item);
  q.add(deferredItem("B", 1, 1, log, "B1").item);
  assert.equal(nodes(), 2);
  assert.equal(q.supersede("B", 2), 1, "B's only item, never run");
  assert.equal(nodes(), 1);
  a.release();
  await q.idle();
  assert.equal(nodes(), 0, "A forgotten once its last item finished");
  q.add(deferredItem("C", 1, 1, log, "C1").item);
  q.add(deferredItem("D", 1, 1, log, "D1").item);
  q.clear();
  assert.equal(nodes(), 1, "only C, whose item still runs");
});

test("queue: busy while work runs or waits; idle() resolves when the last item finishes, or when clear() drops the rest", async () => {
  const q = new WorkQueue({ perNode: 1, global: 1 });
  const log: string[] = [];
  assert.equal(q.busy, false);
  await q.idle(); // at once
  const a = deferredItem("A", 1, 1, log, "a");
  const b = deferredItem("A", 1, 1, log, "b");
  q.add(a.item);
  q.add(b.item);
  let idle = false;
  void q.idle().then(() => (idle = true));
  assert.equal(q.idle(), q.idle(), "one promise for every waiter");
  a.release();
  await waitFor("b to run", () => log.includes("run b"));
  assert.equal(idle, false, "b still runs");
  b.release();
  await waitFor("idle() to resolve", () => idle);
  assert.equal(q.busy, false);

  const c = deferredItem("A", 1, 1, log, "c");
  q.add(c.item);
  q.add(deferredItem("A", 1, 1, log, "d").item);
  let cleared = false;
  void q.idle().then(() => (cleared = true));
  q.clear();
  c.release();
  await waitFor("idle() to resolve after clear()", () => cleared);
  assert.deepEqual(log.slice(-2), ["run c", "drop d"]);
});

test("queue: runs and drops in exactly the order of one list scanned oldest first (random work over many nodes)", async () => {
  let seed = 12345;
  // The high bits of a linear congruential generator (its low bits repeat with a short period).
  const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), Math.floor((seed / 2 ** 31) * n));
  for (const bounds of [
    { perNode: 2, global: 5 },
    { perNode: 3, global: 3 },
    { perNode: 1, global: 8 },
  ]) {
    const queues = {
      heap: new WorkQueue(bounds),
      scanned: new ScannedQueue(bounds),
    };
    const logs = { heap: [] as string[], scanned: [] as string[] };
    const release = {
      heap: new Map<string, () => void>(),
      scanned: new Map<string, () => void>(),
    };
    const generation = new Map<string, number>();
    for (let step = 0; step < 3000; step++) {
      const op = random(10);
      const node = `n${random(12)}`;
      if (op < 6) {
        const name = `i${step}`;
        const priority = random(2);
        const gen = generation.get(node) ?? 1;
        for (const k of ["heap", "scanned"] as const) {
          let done!: () => void;
          const finished = new Promise<void>((r) => (done = r));
          queues[k].add({
            nodeKey: node,
            priority,
            generation: gen,
            run: () => (logs[k].push(`run ${name}`), release[k].set(name, done), finished),
            dropped: () => logs[k].push(`drop ${name}`),
          });
        }
      } else if (op < 9) {
        const names = [...release.scanned.keys()];
        if (names.length === 0) continue;
        const name = names[random(names.length)]!;
        for (const k of ["heap", "scanned"] as const) {
          release[k].get(name)!();
          release[k].delete(name);
        }
      } else if (random(25) === 0) {
        assert.equal(queues.heap.clear(), queues.scanned.clear(), `step ${step}: items cleared`);
      } else {
        const gen = (generation.get(node) ?? 1) + 1;
        generation.set(node, gen);
        assert.equal(queues.heap.supersede(node, gen), queues.scanned.supersede(node, gen), `step ${step}: items dropped`);
      }
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(logs.heap, logs.scanned, `step ${step}, bounds ${JSON.stringify(bounds)}`);
    }
    const count = (what: string) => logs.heap.filter((l) => l.startsWith(what)).length;
    assert.ok(count("run") > 500 && count("drop") > 50, `the walk ran (${count("run")}) and dropped (${count("drop")}) enough to mean something`);
  }
});

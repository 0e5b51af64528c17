// heal/: the work queue (bounds, priority, supersession) and one pass (retry by status class,
// waiting for the sidecar, capability opt-in), with plain fakes for the sidecar connection.
import { test } from "node:test";
import assert from "node:assert/strict";
import { status } from "@grpc/grpc-js";
import { WorkQueue, type WorkItem } from "../../controller/heal/queue.js";
import { HealPass, type PassDeps } from "../../controller/heal/pass.js";
import { healOnce } from "../../controller/heal/once.js";
import { CallError } from "../../common/grpc/call-error.js";
import type { HealAnswer, SidecarConnection } from "../../controller/sidecars/connection.js";
import { SidecarPool } from "../../controller/sidecars/pool.js";
import { Reporter, type HealOutcome } from "../../controller/report/reporter.js";
import type { EventRecorder } from "../../controller/report/events.js";
import type { PvInfo, SidecarInfo, Trigger } from "../../controller/plan/types.js";
import { createLogger } from "../../common/log/logger.js";
import { waitFor } from "../support/wait.js";
import { captureLogger } from "../support/capture-logger.js";
import { gatedSleep } from "../support/gated-sleep.js";
import { delay } from "../../common/util/delay.js";
import { EventEmitter } from "node:events";
import { HealController } from "../../controller/heal/controller.js";
import { KubeRequestError, type ClusterView } from "../../controller/kube/api.js";
import { createMetrics } from "../../controller/report/metrics.js";
import { CREATED_BY_POD_UID, DRIVER_RESTARTED_AT, HANDLED_RESTART, restartMarker } from "../../controller/plan/trigger.js";
import { activeHandles } from "../support/handles.js";

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
  const queued = ([["A", 1, "A1"], ["B", 1, "B1"], ["A", 2, "A2"]] as const).map(([node, gen, name]) => deferredItem(node, 1, gen, log, name));
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

test("queue: runs and drops in exactly the order of one list scanned oldest first (random work over many nodes)", async () => {
  let seed = 12345;
  // The high bits of a linear congruential generator (its low bits repeat with a short period).
  const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), Math.floor((seed / 2 ** 31) * n));
  for (const bounds of [{ perNode: 2, global: 5 }, { perNode: 3, global: 3 }, { perNode: 1, global: 8 }]) {
    const queues = { heap: new WorkQueue(bounds), scanned: new ScannedQueue(bounds) };
    const logs = { heap: [] as string[], scanned: [] as string[] };
    const release = { heap: new Map<string, () => void>(), scanned: new Map<string, () => void>() };
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
          queues[k].add({ nodeKey: node, priority, generation: gen, run: () => (logs[k].push(`run ${name}`), release[k].set(name, done), finished), dropped: () => logs[k].push(`drop ${name}`) });
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

// ---- one pass ----------------------------------------------------------------------------------

const SIDECAR: SidecarInfo = { key: "csi/n1", namespace: "csi", name: "n1", uid: "u", driver: "drv", endpoint: "127.0.0.1:1", nodeId: "n1", annotations: {}, deleting: false };
const PVS: PvInfo[] = ["pv-1", "pv-2"].map((name) => ({ name, uid: name, driver: "drv", handle: `h-${name}`, deleting: false, claim: undefined }));

interface Fake {
  deps: PassDeps;
  calls: string[];
  /** The signal each HealVolume was given, in call order. */
  signals: (AbortSignal | undefined)[];
  outcomes: HealOutcome[];
  /** How often the sidecar was looked up (pool.resolve). */
  resolves: () => number;
}

/** `answers(pv, n)` answers the n-th HealVolume for pv (1-based): a HealAnswer or a status code to fail with. */
function fake(
  answers: (pv: string, n: number) => HealAnswer | status,
  o: {
    caps?: { healVolume: boolean; getVolumeHealth: boolean } | (() => { healVolume: boolean; getVolumeHealth: boolean });
    serving?: () => boolean;
    retry?: Partial<PassDeps["retry"]>;
    /** Awaited before a HealVolume is answered, to keep it in flight. */
    hold?: (pv: string) => Promise<void>;
    queue?: WorkQueue;
  } = {},
): Fake {
  let resolves = 0;
  const calls: string[] = [];
  const signals: (AbortSignal | undefined)[] = [];
  const outcomes: HealOutcome[] = [];
  const conn = {
    address: "fake",
    health: async () => ((o.serving ? o.serving() : true) ? { state: "serving" } : { state: "not_serving", reason: "NOT_SERVING" }),
    capabilities: async () => (typeof o.caps === "function" ? o.caps() : (o.caps ?? { healVolume: true, getVolumeHealth: true })),
    heal: async (pv: string, _mode: string, _timeoutMs: number, signal?: AbortSignal) => {
      calls.push(pv);
      signals.push(signal);
      if (o.hold) await cancellable(o.hold(pv), signal);
      const a = answers(pv, calls.filter((c) => c === pv).length);
      if (typeof a === "number") throw new CallError(a, "fake");
      return a;
    },
  };
  // A real pool (connection states, forget, close) whose every lookup finds the fake connection.
  const pool = new SidecarPool({ podIP: async () => undefined }, {}, () => undefined);
  pool.resolve = async () => (resolves++, conn as unknown as SidecarConnection);
  const deps: PassDeps = {
    queue: o.queue ?? new WorkQueue({ perNode: 4, global: 4 }),
    pool,
    latest: () => SIDECAR,
    reporter: { outcome: (x: HealOutcome) => outcomes.push(x) } as unknown as PassDeps["reporter"],
    logger: createLogger("error", "json"),
    retry: { maxAttempts: 3, initialMs: 1, maxMs: 5, healTimeoutMs: 1000, ...o.retry },
  };
  return { deps, calls, signals, outcomes, resolves: () => resolves };
}

/** A held call ends as grpc-js ends a call whose signal aborts: CANCELLED. */
function cancellable(held: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return held;
  return new Promise((resolve, reject) => {
    const cancelled = () => reject(new CallError(status.CANCELLED, "Cancelled on client"));
    if (signal.aborted) return cancelled();
    signal.addEventListener("abort", cancelled, { once: true });
    held.then(resolve, reject);
  });
}

const NEVER = () => new Promise<void>(() => {});

const HEALED: HealAnswer = { result: "HEALED", health: "HEALTHY", message: "" };
const run = (f: Fake, trigger: Trigger = "restart") =>
  new HealPass(f.deps, { sidecar: SIDECAR, pvs: PVS, mode: trigger === "restart" ? "ALWAYS" : "IF_ABNORMAL", trigger, generation: 1, priority: 0 }).start().done;

const POD_PV: PvInfo = { name: "pv-pod", uid: "pv-pod", driver: "drv", handle: "h-pv-pod", deleting: false, claim: { namespace: "csi", name: "c", uid: undefined } };

test("pass: the volumes the node's Pods show are healed too, each once (one already known is not called twice)", async () => {
  const f = fake(() => HEALED);
  const asked: string[] = [];
  f.deps.podVolumes = async (s) => (asked.push(s.nodeId), [POD_PV, PVS[0]!]);
  const sum = await run(f);
  assert.deepEqual(asked, ["n1"], "one list of the node's Pods per pass");
  assert.deepEqual([...sum.answers.keys()].sort(), ["pv-1", "pv-2", "pv-pod"]);
  assert.deepEqual([...f.calls].sort(), ["pv-1", "pv-2", "pv-pod"]);
});

test("pass: a restart pass lists the node's Pods again until it works; refused (403), it heals the rest; a periodic pass goes on without them", async () => {
  const failing = (fails: number, err: () => Error) => {
    let n = 0;
    return async () => {
      if (++n <= fails) throw err();
      return [POD_PV];
    };
  };
  const restart = fake(() => HEALED, { retry: { initialMs: 100, maxMs: 300 } });
  const gate = gatedSleep();
  restart.deps.random = () => 1;
  restart.deps.sleep = gate.sleep;
  let lists = 0;
  const failingList = failing(4, () => new KubeRequestError(0, "list Pods on node n1: connection refused"));
  restart.deps.podVolumes = () => (lists++, failingList());
  const done = run(restart);
  for (let i = 1; i <= 4; i++) {
    await waitFor(`wait ${i}`, () => gate.waits.length === i);
    assert.equal(lists, i, "no list again before the wait is over");
    gate.wake();
  }
  assert.deepEqual([...(await done).answers.keys()].sort(), ["pv-1", "pv-2", "pv-pod"], "retried until the list worked: no heal lost");
  assert.deepEqual(gate.waits, [100, 200, 300, 300], "after a backoff each time, up to its cap");

  const logger = captureLogger();
  const refused = fake(() => HEALED);
  refused.deps.logger = logger.logger;
  refused.deps.podVolumes = failing(1, () => new KubeRequestError(403, "list Pods on node n1: HTTP 403"));
  assert.deepEqual([...(await run(refused)).answers.keys()].sort(), ["pv-1", "pv-2"], "not asked again: the permission will not come by waiting");
  assert.ok(logger.lines.some((l) => l.message === "could not list the Pods on the sidecar's node" && String(l.error).includes("403")));

  const periodic = fake(() => HEALED);
  periodic.deps.podVolumes = failing(1, () => new KubeRequestError(0, "list Pods on node n1: connection refused"));
  assert.deepEqual([...(await run(periodic, "periodic")).answers.keys()].sort(), ["pv-1", "pv-2"], "the next periodic pass tries again");
});

test("pass: over no volumes it completes at once, nothing called; over one it heals that one", async () => {
  for (const pvs of [[], [PVS[0]!]]) {
    const f = fake(() => HEALED);
    const sum = await new HealPass(f.deps, { sidecar: SIDECAR, pvs, mode: "ALWAYS", trigger: "restart", generation: 1, priority: 0 }).start().done;
    assert.equal(sum.completed, true, `${pvs.length} volume(s): completed (a restart's marker is written only then)`);
    assert.deepEqual(f.calls, pvs.map((pv) => pv.name));
    assert.deepEqual([...sum.answers.keys()], pvs.map((pv) => pv.name));
  }
});

test("pass: transient statuses are retried until answered; the answer is final", async () => {
  const f = fake((pv, n) => (pv === "pv-1" && n <= 2 ? (n === 1 ? status.UNAVAILABLE : status.ABORTED) : HEALED));
  const sum = await run(f, "periodic");
  assert.deepEqual([...sum.answers].sort(), [["pv-1", "HEALED"], ["pv-2", "HEALED"]]);
  assert.equal(f.calls.filter((c) => c === "pv-1").length, 3);
  assert.deepEqual(f.outcomes.filter((x) => x.pv.name === "pv-1").map((x) => [x.attempt, x.result, x.retryInMs !== undefined]), [
    [1, "UNAVAILABLE", true],
    [2, "ABORTED", true],
    [3, "HEALED", false],
  ]);
});

test("pass: refusals and bad requests are not retried; each is reported, and none counts as an abnormal volume", async () => {
  for (const code of [status.NOT_FOUND, status.FAILED_PRECONDITION, status.PERMISSION_DENIED, status.INVALID_ARGUMENT]) {
    const f = fake((pv) => (pv === "pv-1" ? code : HEALED));
    const sum = await run(f);
    assert.equal(sum.answers.get("pv-1"), status[code]);
    assert.equal(f.calls.filter((c) => c === "pv-1").length, 1, status[code]);
    assert.deepEqual(f.outcomes.filter((x) => x.pv.name === "pv-1").map((x) => [x.attempt, x.result, x.retryInMs]), [[1, status[code], undefined]]);
    assert.equal(sum.abnormal, 0, `${status[code]}: a failed heal says nothing about the volume's health`);
  }
});

test("pass: each outcome carries the call's own duration, answered or failed", async () => {
  const started = Date.now();
  const f = fake((pv) => (pv === "pv-1" ? HEALED : status.NOT_FOUND));
  await run(f);
  const elapsed = Date.now() - started;
  assert.deepEqual(f.outcomes.map((x) => x.result).sort(), ["HEALED", "NOT_FOUND"]);
  for (const x of f.outcomes) assert.ok(x.durationMs >= 0 && x.durationMs <= elapsed, `${x.result}: durationMs ${x.durationMs} of a pass that took ${elapsed} ms`);
});

test("pass: UNAVAILABLE looks the sidecar up again (it may have moved); other transient answers keep the connection", async () => {
  const moved = fake((pv, n) => (pv === "pv-1" && n === 1 ? status.UNAVAILABLE : HEALED));
  await run(moved, "periodic");
  assert.equal(moved.resolves(), 2);
  const busy = fake((pv, n) => (pv === "pv-1" && n === 1 ? status.ABORTED : HEALED));
  await run(busy, "periodic");
  assert.equal(busy.resolves(), 1);
});

test("pass: a sidecar that is not SERVING yet is asked again after the backoff, not at once", async () => {
  const probes: number[] = [];
  const f = fake(() => HEALED, { serving: () => probes.push(Date.now()) > 2, retry: { initialMs: 100, maxMs: 100 } });
  const { lines, logger } = captureLogger("info");
  f.deps.logger = logger;
  await run(f);
  assert.equal(probes.length, 3);
  assert.deepEqual(
    lines.filter((l) => l["message"] === "waiting for sidecar").map((l) => [l["sidecar"], l["attempt"], l["reason"]]),
    [
      [SIDECAR.key, 1, "NOT_SERVING at fake"],
      [SIDECAR.key, 2, "NOT_SERVING at fake"],
    ],
    "each wait is logged with its reason",
  );
  // Backoff with jitter waits between half and all of 100 ms.
  for (let i = 1; i < probes.length; i++) assert.ok(probes[i]! - probes[i - 1]! >= 45, `probe ${i + 1} came ${probes[i]! - probes[i - 1]!} ms after the one before`);
});

test("pass: a periodic pass gives up after maxAttempts; a restart pass waits for a sidecar that is down or busy however long it takes", async () => {
  const periodic = fake(() => status.UNAVAILABLE);
  const p = await run(periodic, "periodic");
  assert.equal(p.answers.get("pv-1"), "UNAVAILABLE");
  assert.equal(periodic.calls.filter((c) => c === "pv-1").length, 3);
  assert.deepEqual(periodic.outcomes.filter((x) => x.pv.name === "pv-1").map((x) => [x.attempt, x.retryInMs !== undefined]), [
    [1, true],
    [2, true],
    [3, false],
  ], "the last attempt reported too, as final");
  assert.equal(p.abnormal, 0, "a volume whose sidecar never answered is not counted abnormal");

  const down = [status.ABORTED, status.UNAVAILABLE, status.UNAVAILABLE, status.ABORTED, status.RESOURCE_EXHAUSTED];
  const restart = fake((pv, n) => (pv === "pv-1" ? (n <= 7 ? [status.UNAVAILABLE, status.RESOURCE_EXHAUSTED][n % 2]! : HEALED) : (down[n - 1] ?? HEALED)));
  const r = await run(restart);
  assert.equal(r.answers.get("pv-1"), "HEALED");
  assert.equal(restart.calls.filter((c) => c === "pv-1").length, 8, "past maxAttempts (3), after waiting for the sidecar again");
  assert.equal(r.answers.get("pv-2"), "HEALED", "only the volume's own failures (2 ABORTED) count against maxAttempts, not the sidecar being down");
  assert.equal(restart.calls.filter((c) => c === "pv-2").length, 6);
});

test("pass: a restart pass waiting for a busy sidecar backs off in rounds of maxAttempts, looking the sidecar up again after each round", async () => {
  const f = fake((pv, n) => (pv === "pv-1" && n <= 7 ? status.RESOURCE_EXHAUSTED : HEALED), { retry: { initialMs: 8, maxMs: 1000 } });
  f.deps.random = () => 0; // each wait is the lower end of its band: 4, 8, 16 ms
  const r = await run(f);
  assert.equal(r.answers.get("pv-1"), "HEALED");
  const waits = f.outcomes.filter((x) => x.pv.name === "pv-1" && x.retryInMs !== undefined).map((x) => [x.attempt, x.retryInMs]);
  assert.deepEqual(waits, [[1, 4], [2, 8], [3, 16], [4, 4], [5, 8], [6, 16], [7, 4]]);
  assert.equal(f.resolves(), 3, "the first lookup, then one after the 3rd and the 6th attempt");
});

test("pass: a restart pass gives a volume that keeps failing up after maxAttempts, reported as final, so the pass completes", async (t) => {
  const f = fake((pv) => (pv === "pv-1" ? status.ABORTED : status.DEADLINE_EXCEEDED));
  const pass = new HealPass(f.deps, { sidecar: SIDECAR, pvs: PVS, mode: "ALWAYS", trigger: "restart", generation: 1, priority: 0 }).start();
  t.after(() => pass.cancel());
  let sum: Awaited<typeof pass.done> | undefined;
  void pass.done.then((s) => (sum = s));
  await waitFor("the restart pass to complete", () => sum, { timeoutMs: 5_000 });
  assert.equal(sum!.completed, true);
  assert.deepEqual([...sum!.answers].sort(), [["pv-1", "ABORTED"], ["pv-2", "DEADLINE_EXCEEDED"]]);
  assert.deepEqual(f.outcomes.filter((x) => x.pv.name === "pv-1").map((x) => [x.attempt, x.result, x.retryInMs !== undefined]), [
    [1, "ABORTED", true],
    [2, "ABORTED", true],
    [3, "ABORTED", false],
  ], "the last attempt reported as final");
  assert.equal(f.calls.filter((c) => c === "pv-2").length, 3);
});

test("pass: cancel() cancels its heals in flight; a cancelled call is logged, not reported as a failure", async () => {
  const f = fake(() => HEALED, { hold: NEVER });
  const { lines, logger } = captureLogger("info");
  f.deps.logger = logger;
  const pass = new HealPass(f.deps, { sidecar: SIDECAR, pvs: PVS, mode: "ALWAYS", trigger: "restart", generation: 1, priority: 0 }).start();
  await waitFor("both heals in flight", () => f.calls.length === 2);
  pass.cancel();
  assert.equal((await pass.done).completed, false);
  assert.ok(f.signals.every((s) => s?.aborted), "each call's signal aborted");
  await waitFor("both calls ended", () => lines.filter((l) => l["message"] === "heal cancelled").length === 2, { timeoutMs: 5_000 });
  assert.deepEqual(f.outcomes, [], "no answer to report: no failure, no metric, no Event");
  assert.deepEqual(lines.filter((l) => l["message"] === "heal cancelled").map((l) => [l["pv"], l["result"], l["trigger"]]).sort(), [
    ["pv-1", "CANCELLED", "restart"],
    ["pv-2", "CANCELLED", "restart"],
  ]);
});

test("pass: stop() fixes the summary: a call answering afterwards is reported, but neither added to it nor passed on as an answer", async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, { hold: (pv) => (pv === "pv-2" ? held : Promise.resolve()) });
  const answered: string[] = [];
  const pass = new HealPass(f.deps, { sidecar: SIDECAR, pvs: PVS, mode: "ALWAYS", trigger: "restart", generation: 1, priority: 0 }, (pv) => void answered.push(pv)).start();
  await waitFor("pv-1 answered, pv-2 in flight", () => answered.length === 1 && f.calls.length === 2);
  pass.stop();
  const sum = await pass.done;
  release();
  await waitFor("pv-2's answer reported", () => f.outcomes.length === 2);
  assert.deepEqual([sum.completed, [...sum.answers.keys()], answered], [false, ["pv-1"], ["pv-1"]]);
});

test("pass: a sidecar no longer in the cluster ends the pass at once, not completed, nothing called (the heal subcommand would wait out its deadline)", async () => {
  const f = fake(() => HEALED);
  f.deps.latest = () => undefined;
  const sum = await run(f);
  assert.equal(sum.completed, false);
  assert.deepEqual([f.calls, f.resolves()], [[], 0]);
});

test("pass: waits until the sidecar is SERVING before the first call", async () => {
  let checks = 0;
  const f = fake(() => HEALED, { serving: () => ++checks >= 3 });
  const sum = await run(f);
  assert.equal(sum.completed, true);
  assert.ok(checks >= 3);
  assert.equal(f.calls.length, 2);
});

test("pass: a driver without HEAL_VOLUME (or GET_VOLUME_HEALTH for checks) is never called", async () => {
  const noHeal = fake(() => HEALED, { caps: { healVolume: false, getVolumeHealth: true } });
  assert.match((await run(noHeal)).skipped ?? "", /HEAL_VOLUME/);
  const noCheck = fake(() => HEALED, { caps: { healVolume: true, getVolumeHealth: false } });
  assert.match((await run(noCheck, "periodic")).skipped ?? "", /GET_VOLUME_HEALTH/);
  assert.equal(noHeal.calls.length + noCheck.calls.length, 0);
});

test("pass: cancelled (superseded) → not completed, nothing more is called", async () => {
  const f = fake(() => status.UNAVAILABLE);
  const pass = new HealPass(f.deps, { sidecar: SIDECAR, pvs: PVS, mode: "ALWAYS", trigger: "restart", generation: 1, priority: 0 }).start();
  await waitFor("a first call", () => f.calls.length >= 1);
  pass.cancel();
  const sum = await pass.done;
  assert.equal(sum.completed, false);
  const n = f.calls.length;
  await new Promise((r) => setTimeout(r, 50)); // retries were due within 5 ms: none may come
  assert.equal(f.calls.length, n);
});

test("pass: cancelled while waiting for its sidecar → that wait is interrupted at once, not left to run out", async () => {
  const f = fake(() => HEALED);
  const waits: AbortSignal[] = [];
  // A sidecar whose endpoint takes forever to resolve: only the pass's own signal ends the wait.
  f.deps.pool = {
    resolve: (_s: SidecarInfo, signal: AbortSignal) => {
      waits.push(signal);
      return new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }));
    },
    setState: () => {},
  } as unknown as PassDeps["pool"];
  const pass = new HealPass(f.deps, { sidecar: SIDECAR, pvs: PVS, mode: "ALWAYS", trigger: "restart", generation: 1, priority: 0 }).start();
  await waitFor("the pass to wait for its sidecar", () => waits.length === 1);
  pass.cancel();
  assert.equal(waits[0]!.aborted, true, "the wait for the sidecar is aborted by cancel()");
  assert.equal((await pass.done).completed, false);
  assert.equal(f.calls.length, 0);
});

test("pass: a volume whose sidecar is being found again waits for it outside the queue: queued again once, when it is found", async () => {
  let probes = 0;
  // SERVING for the first call, then not for three probes after its UNAVAILABLE (the sidecar restarting).
  const f = fake((pv, n) => (pv === "pv-1" && n === 1 ? status.UNAVAILABLE : HEALED), { serving: () => ++probes === 1 || probes > 4 });
  let queued = 0;
  const add = f.deps.queue.add.bind(f.deps.queue);
  f.deps.queue.add = (item) => (queued++, add(item));
  const sum = await run(f, "periodic");
  assert.deepEqual([...sum.answers].sort(), [["pv-1", "HEALED"], ["pv-2", "HEALED"]]);
  assert.equal(probes, 5, "found again after three probes that said not SERVING");
  assert.equal(queued, 3, "pv-1 and pv-2, then pv-1 once more: no turns through the queue while its sidecar was looked up");
});

test("pass: volumes that find their sidecar being looked up again join that lookup: one lookup, not one per volume", async () => {
  let probes = 0;
  let up = false;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  // One call at a time: pv-1 fails UNAVAILABLE (the sidecar is looked up again), pv-2 is in flight
  // meanwhile, and pv-3 comes to its turn while the lookup lasts.
  const f = fake((pv, n) => (pv === "pv-1" && n === 1 ? status.UNAVAILABLE : HEALED), {
    serving: () => ++probes === 1 || up,
    hold: (pv) => (pv === "pv-2" ? held : Promise.resolve()),
    queue: new WorkQueue({ perNode: 1, global: 1 }),
  });
  const waits: number[] = [];
  f.deps.sleep = (ms, signal) => (waits.push(ms), delay(ms, signal));
  const { lines, logger } = captureLogger("info");
  f.deps.logger = logger;
  const pvs = ["pv-1", "pv-2", "pv-3"].map((name) => ({ ...PVS[0]!, name, uid: name, handle: `h-${name}` }));
  const pass = new HealPass(f.deps, { sidecar: SIDECAR, pvs, mode: "IF_ABNORMAL", trigger: "periodic", generation: 1, priority: 0 }).start();
  await waitFor("the sidecar being looked up again", () => probes >= 2);
  release();
  await waitFor("pv-3 waiting for that lookup", () => waits.includes(0));
  up = true;
  const sum = await pass.done;
  assert.deepEqual([...sum.answers].sort(), [["pv-1", "HEALED"], ["pv-2", "HEALED"], ["pv-3", "HEALED"]]);
  // Each lookup counts its own attempts from 1: one lookup logs 1, 2, 3, …; a second would start at 1 again.
  const attempts = lines.filter((l) => l["message"] === "waiting for sidecar").map((l) => l["attempt"] as number);
  assert.ok(attempts.length >= 2, `waited: ${attempts.join(", ")}`);
  assert.deepEqual(attempts, attempts.map((_, i) => i + 1), "one lookup after UNAVAILABLE, joined by pv-3");
});

test("pass: a sidecar that says SERVING but fails to tell its capabilities is counted as failing, asked again after the backoff, then healed", async () => {
  let asked = 0;
  let stateWhenAskedAgain: Record<string, number> | undefined;
  const f = fake(() => HEALED, {
    caps: () => {
      if (++asked === 1) throw new CallError(status.UNAVAILABLE, "connection reset");
      stateWhenAskedAgain = f.deps.pool.countByState();
      return { healVolume: true, getVolumeHealth: true };
    },
  });
  const { lines, logger } = captureLogger("info");
  f.deps.logger = logger;
  const pass = new HealPass(f.deps, { sidecar: SIDECAR, pvs: PVS, mode: "ALWAYS", trigger: "restart", generation: 1, priority: 0 }).start();
  let sum: Awaited<typeof pass.done> | undefined;
  void pass.done.then((x) => (sum = x));
  await waitFor("the pass to complete", () => sum, { timeoutMs: 5_000 });
  assert.deepEqual([...sum!.answers].sort(), [["pv-1", "HEALED"], ["pv-2", "HEALED"]]);
  assert.equal(f.resolves(), 2);
  assert.deepEqual(stateWhenAskedAgain, { serving: 0, not_serving: 0, unreachable: 0, failing: 1, unresolved: 0 }, "neither unresolved (it was found) nor not_serving (it said SERVING)");
  assert.deepEqual(f.deps.pool.countByState(), { serving: 1, not_serving: 0, unreachable: 0, failing: 0, unresolved: 0 });
  assert.deepEqual(lines.filter((l) => l["message"] === "waiting for sidecar").map((l) => l["reason"]), ["SERVING at fake, but GetCapabilities failed: UNAVAILABLE: connection reset"]);
});

// ---- the controller over passes ----------------------------------------------------------------

interface ControllerOptions {
  checkIntervalMs?: number;
  /** The controller's jitter: one call per periodic check it schedules (and per marker-write backoff). */
  random?: () => number;
  /** More sidecars the view knows; their volumes are named after them ("n2-pv-1", ...). */
  others?: SidecarInfo[];
}

function controllerOf(f: Fake, sidecar: SidecarInfo, patch: (marker: string) => Promise<void>, o: ControllerOptions = {}) {
  const known = new Map([sidecar, ...(o.others ?? [])].map((s) => [s.key, s]));
  /** Keys the controller looked up in the view (its periodic timers do, when they fire). */
  const lookups: string[] = [];
  const view = Object.assign(new EventEmitter(), {
    sidecars: () => [...known.values()],
    sidecar: (key: string) => (lookups.push(key), known.get(key)),
    volumesOf: (s: SidecarInfo) => (s.key === sidecar.key ? PVS : PVS.map((pv) => ({ ...pv, name: `${s.name}-${pv.name}` }))),
    pv: () => undefined,
  }) as unknown as ClusterView;
  const metrics = createMetrics(() => f.deps.pool.countByState());
  const { lines, logger } = captureLogger("info");
  const kube = { patchCSIAddonsNodeAnnotation: async (_ns: string, _name: string, _key: string, marker: string) => patch(marker) };
  const c = new HealController({
    view,
    kube,
    pass: { ...f.deps, latest: (key) => known.get(key) },
    metrics,
    logger,
    checkIntervalMs: o.checkIntervalMs ?? 0,
    ...(o.random ? { random: o.random } : {}),
  });
  /** What the informer reports after a change of the object. */
  const set = (type: "add" | "update", s: SidecarInfo) => {
    known.set(s.key, s);
    view.emit("sidecar", type, s);
  };
  const update = (annotations: Record<string, string>) => set("update", { ...known.get(sidecar.key)!, annotations });
  const remove = (key = sidecar.key) => {
    const s = known.get(key)!;
    known.delete(key);
    view.emit("sidecar", "delete", s);
  };
  const timedRestarts = async () => (await metrics.restartHealSeconds.get()).values.find((v) => v.metricName === "csi_addons_healer_restart_heal_duration_seconds_count")?.value ?? 0;
  return { c, view, set, update, remove, lookups, timedRestarts, lines, metrics };
}

test("controller: a first sight is checked and its marker recorded but not timed as a restart; a restart is; close() stops listening", async (t) => {
  const f = fake(() => HEALED);
  const patched: string[] = [];
  const first = { [CREATED_BY_POD_UID]: "pod-1" };
  const { c, view, update, timedRestarts, lines, metrics } = controllerOf(f, { ...SIDECAR, annotations: first }, async (m) => void patched.push(m));
  t.after(() => c.close());
  c.lead();
  await waitFor("the first-sight marker recorded", () => patched.length === 1);
  assert.equal(await timedRestarts(), 0, "first sight is not a restart");
  // The driver restarted 5 s before the controller saw it: the heal is timed from the restart.
  update({ ...first, [HANDLED_RESTART]: patched[0]!, [DRIVER_RESTARTED_AT]: new Date(Date.now() - 5_000).toISOString() });
  await waitFor("the restart's marker recorded", () => patched.length === 2);
  assert.equal(await timedRestarts(), 1);
  const sum = (await metrics.restartHealSeconds.get()).values.find((v) => v.metricName === "csi_addons_healer_restart_heal_duration_seconds_sum")?.value;
  assert.ok(sum !== undefined && sum >= 5 && sum < 60, `seconds from the driver's restart to the last volume answered: ${String(sum)}`);
  // The one line an operator greps for: which restart of which node, how every volume answered, how long.
  const done = lines.filter((l) => l["message"] === "restart heal done");
  assert.deepEqual(done.map((l) => [l["sidecar"], l["marker"], l["answers"]]), [
    [SIDECAR.key, patched[0], { HEALED: 2 }],
    [SIDECAR.key, patched[1], { HEALED: 2 }],
  ]);
  for (const l of done) assert.ok(typeof l["seconds"] === "number" && l["seconds"] >= 0 && l["seconds"] < 60, `seconds: ${String(l["seconds"])}`);
  await c.close();
  assert.equal(view.listenerCount("sidecar"), 0);
});

test("controller: a CSIAddonsNode gone (404) while its marker is written is not written again", async (t) => {
  const f = fake(() => HEALED);
  let attempts = 0;
  const { c, lines } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async () => {
    attempts++;
    throw new KubeRequestError(404, "csiaddonsnodes \"n1\" not found");
  });
  t.after(() => c.close());
  c.lead();
  // waitFor probes from a timer, so the write's rejection (and a retry's warning, which would come
  // in the same turn) has been handled by the time the probe sees the attempt.
  await waitFor("the marker write tried", () => attempts === 1);
  assert.deepEqual(lines.filter((l) => l["level"] === "warn").map((l) => l["message"]), [], "a 404 is not a failure to retry");
});

const HANDLED = { [CREATED_BY_POD_UID]: "pod-1", [HANDLED_RESTART]: "pod-1+" };
const other = (n: number, annotations: Record<string, string> = HANDLED): SidecarInfo => ({ ...SIDECAR, key: `csi/n${n}`, name: `n${n}`, nodeId: `n${n}`, annotations });

test("controller: a deleted CSIAddonsNode's pass ends: its heals still waiting in the queue are never sent", async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, { hold: () => held, queue: new WorkQueue({ perNode: 1, global: 1 }) });
  const patched: string[] = [];
  const { c, remove } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async (m) => void patched.push(m));
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("pv-1 in flight, pv-2 waiting for the sidecar's one slot", () => f.calls.length === 1 && f.deps.queue.size === 1);
  remove();
  release();
  await f.deps.queue.idle();
  assert.deepEqual(f.calls, ["pv-1"], "pv-2 is not sent to a sidecar that is gone");
  assert.deepEqual(patched, []);
});

test("controller: a CSIAddonsNode deleted and made again (its handled marker lost with it) is not seen anew: the marker handled here is recorded on it, nothing called", async (t) => {
  const f = fake(() => HEALED);
  const patched: string[] = [];
  const first = { [CREATED_BY_POD_UID]: "pod-1" };
  const { c, set, update, remove } = controllerOf(f, { ...SIDECAR, annotations: first }, async (m) => void patched.push(m));
  t.after(() => c.close());
  c.lead();
  await waitFor("the first-sight marker recorded", () => patched.length === 1);
  update({ ...first, [HANDLED_RESTART]: patched[0]! });
  remove();
  // The sidecar makes its object again when it is deleted (DESIGN 4.3): same pod, no handled marker.
  set("add", { ...SIDECAR, annotations: first });
  await waitFor("the recreated object's marker recorded", () => patched.length === 2);
  assert.deepEqual(patched, ["pod-1+", "pod-1+"]);
  assert.deepEqual(f.calls, ["pv-1", "pv-2"]);
});

/**
 * A leading controller over SIDECAR whose heals wait until released; `cutShort()` starts a pass
 * (a restart heal by default), and while its calls are in flight deletes the object (the upstream controller deletes one
 * it cannot reach), then lets the calls answer.
 */
function restartCutShort(t: { after(fn: () => unknown): void }) {
  let release = () => {};
  let held = Promise.resolve();
  const f = fake(() => HEALED, { hold: () => held });
  const patched: string[] = [];
  const restarted = { ...HANDLED, [DRIVER_RESTARTED_AT]: "2026-12-03T10:00:00.000Z" };
  const ctl = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async (m) => void patched.push(m));
  t.after(() => (release(), ctl.c.close()));
  ctl.c.lead();
  /** `change`: the object as changed to start the pass (by default a driver restart, healed with ALWAYS). */
  const cutShort = async (change: Record<string, string> = restarted) => {
    held = new Promise<void>((r) => (release = r));
    const before = f.calls.length;
    ctl.update(change);
    await waitFor("the restart heal in flight", () => f.calls.length === before + 2);
    ctl.remove();
    release();
  };
  const passes = () => ctl.lines.filter((l) => l["message"] === "restart heal");
  return { ...ctl, f, patched, restarted, cutShort, passes };
}

test("controller: a CSIAddonsNode deleted during its restart heal and made again by its sidecar (same restart, no handled marker) is healed with ALWAYS, not downgraded to a first-sight check", async (t) => {
  const { set, update, remove, patched, restarted, cutShort, passes } = restartCutShort(t);
  await cutShort();
  // The sidecar makes it again at once.
  const { [HANDLED_RESTART]: _gone, ...recreated } = restarted;
  set("add", { ...SIDECAR, annotations: recreated });
  await waitFor("the restart's marker recorded", () => patched.length === 1);
  assert.deepEqual(patched, [restartMarker(restarted)]);
  assert.deepEqual(passes().map((l) => [l["trigger"], l["mode"], l["attachable"]]), [["restart", "ALWAYS", 2], ["restart", "ALWAYS", 2]]);

  // Deleted once more, now handled: made again, it is not healed again; the marker is recorded on it.
  update({ ...recreated, [HANDLED_RESTART]: patched[0]! });
  remove();
  set("add", { ...SIDECAR, annotations: recreated });
  await waitFor("the marker recorded again", () => patched.length === 2);
  assert.equal(passes().length, 2, "no third pass");
});

test("controller: a remembered cut-short restart does not apply to the object made again for another restart, nor to one already handled", async (t) => {
  const { set, f, patched, restarted, cutShort, passes } = restartCutShort(t);
  // Made again by a new node-plugin pod: a first sight of that pod, checked (no restart of it is known).
  await cutShort();
  set("add", { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-2" } });
  await waitFor("pod-2's first sight recorded", () => patched.length === 1);
  assert.deepEqual(passes().map((l) => [l["trigger"], l["mode"], l["marker"]]).at(-1), ["first-sight", "IF_ABNORMAL", "pod-2+"]);
  // Made again with the restart already recorded (another replica healed it): nothing to do.
  set("update", { ...SIDECAR, annotations: HANDLED });
  await cutShort();
  const [count, calls] = [passes().length, f.calls.length];
  set("add", { ...SIDECAR, annotations: { ...restarted, [HANDLED_RESTART]: restartMarker(restarted) } });
  await new Promise((r) => setImmediate(r));
  assert.equal(passes().length, count);
  assert.equal(f.calls.length, calls);
});

test("controller: a first-sight check cut short by the object's deletion is a check again when the object is made again, not a heal with ALWAYS", async (t) => {
  const { set, patched, cutShort, passes } = restartCutShort(t);
  // No handled marker: a first sight of pod-1, checked.
  const firstSight = { [CREATED_BY_POD_UID]: "pod-1" };
  await cutShort(firstSight);
  set("add", { ...SIDECAR, annotations: firstSight });
  await waitFor("the check's marker recorded", () => patched.length === 1);
  assert.deepEqual(passes().map((l) => [l["trigger"], l["mode"]]), [["first-sight", "IF_ABNORMAL"], ["first-sight", "IF_ABNORMAL"]]);
});

test("controller: only a check interval of 0 turns the periodic checks off: one of 1 ms checks", async (t) => {
  const f = fake(() => HEALED);
  const { c } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, { checkIntervalMs: 1 });
  t.after(() => c.close());
  c.lead();
  await waitFor("a periodic check", () => f.outcomes.length >= 2);
});

test("controller: leadership lost and regained: the periodic checks start again", async (t) => {
  const f = fake(() => HEALED);
  const { c } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, { checkIntervalMs: 100, random: () => 0 });
  t.after(() => c.close());
  c.lead();
  await waitFor("a periodic check", () => f.outcomes.length === 2);
  c.unlead();
  const before = f.outcomes.length;
  c.lead();
  await waitFor("a periodic check after leading again", () => f.outcomes.length >= before + 2, { timeoutMs: 5_000 });
});

test("controller: one periodic check scheduled per sidecar however often its object changes, none for one being deleted, and none that keeps the process alive", (t) => {
  const f = fake(() => HEALED);
  let scheduled = 0;
  const { c, update } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, {
    checkIntervalMs: 3_600_000,
    random: () => (scheduled++, 0.5),
    others: [{ ...other(2), deleting: true }],
  });
  t.after(() => c.close());
  const timers = () => activeHandles("Timeout");
  const before = timers();
  c.lead();
  assert.equal(scheduled, 1, "n1's check; none for n2, which is being deleted");
  assert.equal(timers(), before, "the periodic timer is unref'd");
  for (let i = 0; i < 3; i++) update({ ...HANDLED, "sidecar.csiaddons.openshift.io/lastUpdatedAt": `2026-12-03T00:00:0${i}Z` });
  assert.equal(scheduled, 1, "changes of the object do not add checks");
  assert.deepEqual(f.calls, []);
});

test("controller: a change of the object during a periodic check schedules the next one; the check's end then adds none", async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, { hold: () => held });
  let scheduled = 0;
  // The first check comes due at 0.9 x 100 ms; the next ones an hour later.
  const { c, update } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, {
    checkIntervalMs: 100,
    random: () => (scheduled++ === 0 ? 0 : 0.5),
  });
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("the periodic check in flight", () => f.calls.length === 2);
  assert.equal(scheduled, 1);
  // While the check runs, the object changes: a timer for the next check is set then.
  update({ ...HANDLED, "sidecar.csiaddons.openshift.io/lastUpdatedAt": "2026-12-04T00:00:00Z" });
  assert.equal(scheduled, 2);
  release();
  await waitFor("the check answered", () => f.outcomes.length === 2);
  await new Promise((r) => setImmediate(r));
  assert.equal(scheduled, 2, "one timer for the node, not a second chain of checks");
});

test("controller: a restart's heals go before the periodic checks of other nodes already waiting for a slot", async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, { hold: () => held, queue: new WorkQueue({ perNode: 4, global: 1 }) });
  const { c, set } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, { checkIntervalMs: 100, random: () => 0 });
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("n1's periodic check: one call in flight, one waiting", () => f.calls.length === 1 && f.deps.queue.size === 1);
  set("add", other(2, { ...HANDLED, [DRIVER_RESTARTED_AT]: "2026-12-04T10:00:00.000Z" }));
  await waitFor("n2's restart heals queued", () => f.deps.queue.size === 3);
  release();
  await waitFor("every heal sent", () => f.calls.length >= 4);
  assert.deepEqual(f.calls.slice(0, 4), ["pv-1", "n2-pv-1", "n2-pv-2", "pv-2"]);
});

test("controller: a periodic check comes due only for a sidecar still there and not being deleted", async (t) => {
  const f = fake(() => HEALED);
  // n1, n2, n3 come due at 0.9, 1.0 and 1.1 times the interval, in that order.
  const jitter = [0, 0.5, 1];
  let i = 0;
  const { c, set, remove, lookups } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, {
    checkIntervalMs: 200,
    random: () => jitter[i++ % jitter.length]!,
    others: [other(2), other(3)],
  });
  t.after(() => c.close());
  c.lead();
  remove(); // n1 deleted
  set("update", { ...other(2), deleting: true });
  await waitFor("n3's periodic check", () => f.calls.length >= 2);
  assert.deepEqual(f.calls, ["n3-pv-1", "n3-pv-2"], "n2, being deleted, is not checked");
  assert.ok(!lookups.includes(SIDECAR.key), "the deleted n1's timer was cleared, not left to fire");
});

test("controller: a newer restart drops the older pass's heals still waiting in the queue at once", async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, { hold: () => held, queue: new WorkQueue({ perNode: 1, global: 1 }) });
  const patched: string[] = [];
  const first = { [CREATED_BY_POD_UID]: "pod-1" };
  const { c, update } = controllerOf(f, { ...SIDECAR, annotations: first }, async (m) => void patched.push(m));
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("pv-1 in flight, pv-2 waiting for the sidecar's one slot", () => f.calls.length === 1 && f.deps.queue.size === 1);
  const restartedAt = "2026-12-03T00:00:00Z";
  update({ ...first, [DRIVER_RESTARTED_AT]: restartedAt });
  assert.equal(f.deps.queue.size, 0, "the superseded pass's pv-2 no longer waits");
  release();
  await waitFor("the newer marker recorded", () => patched.length === 1);
  assert.deepEqual(patched, [`pod-1+${restartedAt}`]);
  assert.deepEqual(f.calls, ["pv-1", "pv-1", "pv-2"]);
});

test("controller: a driver that heals but cannot check has its first sight recorded with nothing called, so its next restart is healed; one without HEAL_VOLUME is left alone", async (t) => {
  const f = fake(() => HEALED, { caps: { healVolume: true, getVolumeHealth: false } });
  const patched: string[] = [];
  const first = { [CREATED_BY_POD_UID]: "pod-1" };
  const { c, update, lines, metrics } = controllerOf(f, { ...SIDECAR, annotations: first }, async (m) => void patched.push(m));
  t.after(() => c.close());
  c.lead();
  await waitFor("the first-sight marker recorded", () => patched.length === 1, { timeoutMs: 5_000 });
  assert.deepEqual(f.calls, [], "nothing to check with");
  assert.deepEqual(await abnormalSeries(metrics), [], "a node whose volumes were not checked is not said to have 0 abnormal");
  assert.deepEqual(lines.filter((l) => l["message"] === "first sight not checked").map((l) => l["reason"]), ["driver drv does not offer VolumeHealer GET_VOLUME_HEALTH"]);
  update({ ...first, [HANDLED_RESTART]: patched[0]!, [DRIVER_RESTARTED_AT]: "2026-12-03T00:00:00Z" });
  await waitFor("the restart's marker recorded", () => patched.length === 2);
  assert.deepEqual(f.outcomes.map((x) => [x.pv.name, x.trigger, x.mode, x.result]).sort(), [
    ["pv-1", "restart", "ALWAYS", "HEALED"],
    ["pv-2", "restart", "ALWAYS", "HEALED"],
  ]);

  const none = fake(() => HEALED, { caps: { healVolume: false, getVolumeHealth: true } });
  const untouched: string[] = [];
  const alone = controllerOf(none, { ...SIDECAR, annotations: first }, async (m) => void untouched.push(m));
  t.after(() => alone.c.close());
  alone.c.lead();
  await waitFor("the sidecar left alone", () => alone.lines.some((l) => l["message"] === "sidecar left alone"));
  assert.deepEqual(untouched, [], "no marker on an object whose driver has not opted in");
  assert.deepEqual(none.calls, []);
  assert.deepEqual(await abnormalSeries(alone.metrics), [], "nor one left alone");
});

test("controller: a restart pass whose volume keeps answering ABORTED completes after maxAttempts: VolumeHealFailed, marker recorded, periodic checks resume", async (t) => {
  const f = fake((pv) => (pv === "pv-1" ? status.ABORTED : HEALED));
  const events: string[][] = [];
  const recorder = { volume: (pv: PvInfo, type: string, reason: string) => events.push([pv.name, type, reason]) } as unknown as EventRecorder;
  f.deps.reporter = new Reporter(createLogger("error", "json"), createMetrics(() => ({})), recorder);
  const patched: string[] = [];
  const restarted = { ...HANDLED, [DRIVER_RESTARTED_AT]: "2026-12-03T00:00:00Z" };
  const { c } = controllerOf(f, { ...SIDECAR, annotations: restarted }, async (m) => void patched.push(m), { checkIntervalMs: 100, random: () => 0.5 });
  t.after(() => c.close());
  c.lead();
  await waitFor("the restart's marker recorded", () => patched.length === 1, { timeoutMs: 5_000 });
  assert.deepEqual(patched, ["pod-1+2026-12-03T00:00:00Z"]);
  assert.equal(f.calls.filter((x) => x === "pv-1").length, 3, "maxAttempts");
  assert.deepEqual(events.filter(([pv]) => pv === "pv-1"), [["pv-1", "Warning", "VolumeHealFailed"]]);
  await waitFor("a periodic check of the node", () => f.calls.filter((x) => x === "pv-2").length >= 2, { timeoutMs: 5_000 });
});

test("controller: losing leadership cancels heals in flight; they are not reported; later changes start nothing", async (t) => {
  const f = fake(() => HEALED, { hold: NEVER });
  const { lines, logger } = captureLogger("info");
  f.deps.logger = logger;
  const patched: string[] = [];
  const { c, update } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async (m) => void patched.push(m));
  t.after(() => c.close());
  c.lead();
  await waitFor("both heals in flight", () => f.calls.length === 2);
  c.unlead();
  assert.ok(f.signals.every((s) => s?.aborted), "each call cancelled at once, not left to its deadline");
  await waitFor("both calls ended", () => lines.filter((l) => l["message"] === "heal cancelled").length === 2, { timeoutMs: 5_000 });
  assert.deepEqual(f.outcomes, []);
  assert.deepEqual(patched, []);
  // A standby acts on no change of the objects: the new leader does (two healing at once otherwise).
  const restarts = () => lines.filter((l) => l["message"] === "restart heal").length;
  const before = restarts();
  update({ [CREATED_BY_POD_UID]: "pod-2" });
  await new Promise((r) => setImmediate(r));
  assert.equal(restarts(), before, "no pass started by a replica that no longer leads");
  assert.equal(f.calls.length, 2);
});

test("controller: at shutdown nothing new is sent; calls in flight get the grace to answer (reported), then are cancelled", async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, { hold: () => held, queue: new WorkQueue({ perNode: 1, global: 1 }) });
  const { c } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async () => {});
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("pv-1 in flight, pv-2 waiting for the sidecar's one slot", () => f.calls.length === 1 && f.deps.queue.size === 1);
  const closed = c.close(60_000);
  release();
  await closed;
  assert.deepEqual(f.calls, ["pv-1"], "pv-2 is not sent once shutdown began");
  assert.deepEqual(f.outcomes.map((x) => [x.pv.name, x.result]), [["pv-1", "HEALED"]], "the answer within the grace is reported");

  const stuck = fake(() => HEALED, { hold: NEVER });
  const { lines, logger } = captureLogger("info");
  stuck.deps.logger = logger;
  const s = controllerOf(stuck, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async () => {});
  t.after(() => s.c.close());
  s.c.lead();
  await waitFor("both heals in flight", () => stuck.calls.length === 2);
  const closing = s.c.close(100);
  assert.ok(stuck.signals.every((x) => x !== undefined && !x.aborted), "not cancelled while the grace lasts");
  await closing;
  assert.ok(stuck.signals.every((x) => x?.aborted), "cancelled when the grace is over");
  await waitFor("both calls ended", () => lines.filter((l) => l["message"] === "heal cancelled").length === 2, { timeoutMs: 5_000 });
  assert.deepEqual(stuck.outcomes, []);
});

test("controller: a marker write that fails is tried again after its backoff, and given up when this replica stops leading or a newer restart's marker is recorded", async (t) => {
  // The retries' backoff runs on mocked timers: ticked past, never waited for.
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const turn = () => new Promise((r) => setImmediate(r));
  const first = { [CREATED_BY_POD_UID]: "pod-1" };
  const failing = () => {
    const writes: string[] = [];
    const state = { failing: true, waiters: [] as [number, () => void][] };
    const patch = async (m: string) => {
      writes.push(m);
      for (const [n, resolve] of state.waiters) if (writes.length >= n) resolve();
      if (state.failing) throw new KubeRequestError(500, "etcdserver: request timed out");
    };
    const written = (n: number) => new Promise<void>((r) => (writes.length >= n ? r() : state.waiters.push([n, r])));
    return { writes, state, patch, written };
  };

  const a = failing();
  const standby = controllerOf(fake(() => HEALED), { ...SIDECAR, annotations: first }, a.patch, { random: () => 0 });
  t.after(() => standby.c.close());
  standby.c.lead();
  await a.written(1);
  await turn(); // the failure handled: the write waits out its backoff
  standby.c.unlead();
  a.state.failing = false;
  t.mock.timers.tick(30_000);
  await turn();
  assert.equal(a.writes.length, 1, "a replica that no longer leads writes no marker");

  const b = failing();
  const leader = controllerOf(fake(() => HEALED), { ...SIDECAR, annotations: first }, b.patch, { random: () => 0 });
  t.after(() => leader.c.close());
  leader.c.lead();
  await b.written(1);
  await turn();
  b.state.failing = false;
  leader.update({ ...first, [DRIVER_RESTARTED_AT]: "2026-12-04T00:00:00Z" });
  await b.written(2);
  assert.deepEqual(b.writes, ["pod-1+", "pod-1+2026-12-04T00:00:00Z"]);
  t.mock.timers.tick(30_000);
  await turn();
  assert.deepEqual(b.writes, ["pod-1+", "pod-1+2026-12-04T00:00:00Z"], "the older marker is not written over the newer one");

  // A failed write is tried again after the backoff (from 250-500 ms on; the jitter here is 0), not at once.
  const w = failing();
  const again = controllerOf(fake(() => HEALED), { ...SIDECAR, annotations: first }, w.patch, { random: () => 0 });
  t.after(() => again.c.close());
  again.c.lead();
  await w.written(1);
  // The second wait is twice the first.
  for (const [n, waitMs] of [[1, 250], [2, 500]] as const) {
    await turn();
    t.mock.timers.tick(waitMs - 1);
    await turn();
    assert.equal(w.writes.length, n, `not before ${waitMs} ms`);
    t.mock.timers.tick(1);
    await w.written(n + 1);
  }
  // Each failure is logged as a warning with its reason and the wait before the next try.
  const warned = again.lines.filter((l) => l["message"] === "could not record the handled restart; retrying");
  assert.deepEqual(warned.map((l) => [l["level"], l["sidecar"], l["retryInMs"]]), [["warn", SIDECAR.key, 250], ["warn", SIDECAR.key, 500]]);
  assert.match(String(warned[0]!["error"]), /etcdserver: request timed out/);
});

test("controller: at shutdown a call that answers within the grace with a transient status is final, not tried again, and the pass is not done", async (t) => {
  let release1!: () => void;
  let release2!: () => void;
  const held1 = new Promise<void>((r) => (release1 = r));
  const held2 = new Promise<void>((r) => (release2 = r));
  const gate = gatedSleep();
  const f = fake((pv) => (pv === "pv-1" ? status.UNAVAILABLE : HEALED), { hold: (pv) => (pv === "pv-1" ? held1 : held2) });
  f.deps.sleep = gate.sleep;
  const { c, lines } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async () => {});
  t.after(() => (release1(), release2(), c.close()));
  c.lead();
  await waitFor("both heals in flight", () => f.calls.length === 2);
  const closing = c.close(60_000);
  release1();
  await waitFor("pv-1's answer reported", () => f.outcomes.length === 1);
  assert.deepEqual(f.outcomes.map((x) => [x.pv.name, x.result, x.retryInMs]), [["pv-1", "UNAVAILABLE", undefined]], "reported as final");
  assert.deepEqual(gate.waits, [], "no retry scheduled once shutdown began");
  // pv-2 answers too, within the grace: the shutdown ends then, not when the 60 s run out.
  release2();
  await closing;
  assert.deepEqual(f.outcomes.map((x) => [x.pv.name, x.result]), [["pv-1", "UNAVAILABLE"], ["pv-2", "HEALED"]]);
  assert.deepEqual(f.calls, ["pv-1", "pv-2"]);
  assert.deepEqual(lines.filter((l) => l["message"] === "restart heal done"), [], "a pass stopped by the shutdown is not done, every volume answered or not");
});

test("controller: restart heals cut short on several nodes at once are each healed with ALWAYS when their objects are made again", async (t) => {
  let release!: () => void;
  let held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, { hold: () => held, queue: new WorkQueue({ perNode: 4, global: 8 }) });
  const patched: string[] = [];
  const restarted = { ...HANDLED, [DRIVER_RESTARTED_AT]: "2026-12-04T10:00:00.000Z" };
  const { c, set, remove, lines } = controllerOf(f, { ...SIDECAR, annotations: restarted }, async (m) => void patched.push(m), { others: [other(2, restarted), other(3, restarted)] });
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("the three restart heals in flight", () => f.calls.length === 6);
  // The upstream controller deletes the three objects (it cannot reach the sidecars while their drivers restart).
  for (const key of [SIDECAR.key, "csi/n2", "csi/n3"]) remove(key);
  release();
  held = Promise.resolve();
  const { [HANDLED_RESTART]: _gone, ...recreated } = restarted;
  for (const s of [SIDECAR, other(2), other(3)]) set("add", { ...s, annotations: recreated });
  await waitFor("the three restarts' markers recorded", () => patched.length === 3);
  const passes = lines.filter((l) => l["message"] === "restart heal").map((l) => [l["sidecar"], l["trigger"], l["mode"]]);
  assert.deepEqual(passes.slice(3).sort(), [
    ["csi/n1", "restart", "ALWAYS"],
    ["csi/n2", "restart", "ALWAYS"],
    ["csi/n3", "restart", "ALWAYS"],
  ]);
});

const noStates = { serving: 0, not_serving: 0, unreachable: 0, failing: 0, unresolved: 0 };
const ABNORMAL: HealAnswer = { result: "NOT_HEALABLE", health: "ABNORMAL", message: "image gone" };
const abnormalSeries = async (metrics: ReturnType<typeof createMetrics>) => (await metrics.registry.metrics()).split("\n").filter((l) => l.startsWith("csi_addons_healer_volumes_abnormal{"));

test("controller: a deleted CSIAddonsNode leaves nothing behind: no connection state (even when deleted while its pod's IP was read), no abnormal-volumes series", async (t) => {
  const f = fake(() => ABNORMAL);
  const patched: string[] = [];
  const { c, remove, metrics } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async (m) => void patched.push(m));
  t.after(() => c.close());
  c.lead();
  await waitFor("the first-sight marker recorded", () => patched.length === 1);
  assert.deepEqual(await abnormalSeries(metrics), ['csi_addons_healer_volumes_abnormal{driver="drv",node="n1"} 2']);
  assert.deepEqual(f.deps.pool.countByState(), { ...noStates, serving: 1 });
  remove();
  assert.deepEqual(f.deps.pool.countByState(), noStates);
  assert.deepEqual(await abnormalSeries(metrics), [], "an alert on this node's volumes can clear");

  // A pod:// endpoint whose pod read only ends when the pass's signal aborts.
  const g = fake(() => HEALED);
  let podReads = 0;
  let podReadAborted = false;
  const podIP = (_ns: string, _pod: string, signal: AbortSignal) => {
    podReads++;
    return new Promise<string | undefined>((_resolve, reject) =>
      signal.addEventListener("abort", () => ((podReadAborted = true), reject(new Error("aborted"))), { once: true }),
    );
  };
  g.deps.pool = new SidecarPool({ podIP }, {}, () => undefined);
  const r = controllerOf(g, { ...SIDECAR, endpoint: "pod://plugin.csi:9070", annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async () => {});
  t.after(() => r.c.close());
  r.c.lead();
  await waitFor("the pod's IP being read", () => podReads === 1);
  r.remove();
  await waitFor("the read aborted", () => podReadAborted);
  // The pass handles the aborted read in promise callbacks: all of them have run by the next turn.
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(g.deps.pool.countByState(), noStates);
});

test("controller: a replica that stops leading (unlead(), or close() at shutdown) exports no leader's numbers: no connection states, no abnormal volumes, leader 0; after close() a late lead() starts nothing", async (t) => {
  for (const stop of ["unlead", "close"] as const) {
    const f = fake(() => ABNORMAL);
    const patched: string[] = [];
    const { c, metrics, lines } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async (m) => void patched.push(m));
    t.after(() => c.close());
    const exported = async () => (await metrics.registry.metrics()).split("\n");
    c.lead();
    await waitFor("the first-sight marker recorded", () => patched.length === 1);
    assert.equal((await abnormalSeries(metrics)).length, 1);
    assert.ok((await exported()).includes("csi_addons_healer_leader 1"), "leader 1 while leading");
    if (stop === "unlead") c.unlead();
    else await c.close();
    assert.deepEqual(f.deps.pool.countByState(), noStates, stop);
    assert.deepEqual(await abnormalSeries(metrics), [], stop);
    assert.ok((await exported()).includes('csi_addons_healer_sidecar_connections{state="serving"} 0'), stop);
    assert.ok((await exported()).includes("csi_addons_healer_leader 0"), stop);
    if (stop === "close") {
      // An election callback that comes after the shutdown began.
      c.lead();
      assert.equal(lines.filter((l) => l["message"] === "restart heal").length, 1, "nothing started after close()");
      assert.ok((await exported()).includes("csi_addons_healer_leader 0"));
    }
  }
});

// ---- the heal subcommand -----------------------------------------------------------------------

function terminal() {
  const progress: string[] = [];
  let out = "";
  return { progress, out: () => out, term: { progress: (l: string) => void progress.push(l), print: (t: string) => void (out += t) } };
}

const viewOf = (sidecars: SidecarInfo[], pvs: PvInfo[] = PVS) => ({ sidecars: () => sidecars, volumesOf: () => pvs }) as unknown as ClusterView;
const resultRows = (out: string) => out.split("\n").filter((l) => l.startsWith("pv-")).map((l) => l.split(/\s+/));

test("heal subcommand: a CSIAddonsNode being deleted is left alone; with no other on the node, exit 1 with the reason", async () => {
  const f = fake(() => HEALED);
  const t = terminal();
  const code = await healOnce(viewOf([{ ...SIDECAR, deleting: true }]), f.deps, { node: "n1", pv: undefined, mode: "always" }, t.term, 5_000);
  assert.equal(code, 1);
  assert.equal(t.out(), "no CSIAddonsNode for node n1\n");
  assert.deepEqual(f.calls, []);
});

test("heal subcommand: a node without volumes is nothing to do (exit 0); a --pv not on it is an error (exit 1)", async () => {
  const f = fake(() => HEALED);
  const t = terminal();
  assert.equal(await healOnce(viewOf([SIDECAR], []), f.deps, { node: "n1", pv: undefined, mode: "if-abnormal" }, t.term, 5_000), 0);
  assert.equal(t.out(), "no volumes on node n1\n");
  const u = terminal();
  assert.equal(await healOnce(viewOf([SIDECAR], []), f.deps, { node: "n1", pv: "pv-9", mode: "if-abnormal" }, u.term, 5_000), 1);
  assert.equal(u.out(), "PersistentVolume pv-9 is not on node n1\n");
  assert.deepEqual(f.calls, []);
});

test("heal subcommand: a driver without HEAL_VOLUME: every volume SKIPPED, the reason under the table, exit 1, nothing called", async () => {
  const f = fake(() => HEALED, { caps: { healVolume: false, getVolumeHealth: true } });
  const t = terminal();
  const code = await healOnce(viewOf([SIDECAR]), f.deps, { node: "n1", pv: undefined, mode: "always" }, t.term, 5_000);
  assert.equal(code, 1);
  assert.deepEqual(resultRows(t.out()), [["pv-1", "drv", "h-pv-1", "SKIPPED"], ["pv-2", "drv", "h-pv-2", "SKIPPED"]]);
  assert.match(t.out(), /^SKIPPED 2 \(mode ALWAYS, node n1\)\ncsi\/n1: skipped: driver drv does not offer VolumeHealer HEAL_VOLUME\n$/m);
  assert.deepEqual(f.calls, []);
});

test("heal subcommand: volumes not answered by the deadline are cancelled and listed as NO_ANSWER, exit 1", async () => {
  const f = fake(() => HEALED, { hold: (pv) => (pv === "pv-2" ? NEVER() : Promise.resolve()) });
  const t = terminal();
  const code = await healOnce(viewOf([SIDECAR]), f.deps, { node: "n1", pv: undefined, mode: "always" }, t.term, 200);
  assert.equal(code, 1);
  assert.deepEqual(resultRows(t.out()), [["pv-1", "drv", "h-pv-1", "HEALED"], ["pv-2", "drv", "h-pv-2", "NO_ANSWER"]]);
  assert.deepEqual(t.progress, ["[1/2] pv-1: HEALED"]);
  assert.equal(f.signals[f.calls.indexOf("pv-2")]?.aborted, true, "the call in flight is cancelled");
});

test("controller: at lead, the first periodic checks of the nodes are spread over the interval, not all due within its jitter", async (t) => {
  const f = fake(() => HEALED);
  const { c } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, { checkIntervalMs: 800, random: () => 0.5, others: [other(2), other(3), other(4)] });
  t.after(() => c.close());
  const firstAt = new Map<string, number>();
  const t0 = Date.now();
  c.lead();
  await waitFor("every node's first check", () => {
    for (const pv of f.calls) {
      const node = pv.includes("-pv-") ? pv.split("-pv-")[0]! : "n1";
      if (!firstAt.has(node)) firstAt.set(node, Date.now() - t0);
    }
    return firstAt.size === 4;
  }, { timeoutMs: 5_000, intervalMs: 5 });
  const times = [...firstAt.values()].sort((a, b) => a - b);
  // Due at 100, 300, 500 and 700 ms (the i-th of 4 at (i + 0.5) / 4 of 800 ms); jittered alone, all at 720-880 ms.
  assert.ok(times[3]! - times[0]! >= 400, `first checks at ${times.join(", ")} ms`);
  assert.ok(times[0]! < 400, `the first node checked within half the interval: ${times[0]} ms`);
});

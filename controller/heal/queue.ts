// The work queue: at most `perNode` calls at once to one sidecar and `global` in the cluster;
// restart work (priority 0) before periodic work (1), first in first out within a priority; a
// newer trigger for a node drops that node's queued work of older generations (supersession).
export interface WorkItem {
  nodeKey: string;
  priority: number;
  generation: number;
  run(): Promise<void>;
  /** Called instead of run() when the item is dropped without running. */
  dropped(): void;
}

export class WorkQueue {
  private readonly queued: WorkItem[] = [];
  private readonly runningByNode = new Map<string, number>();
  private running = 0;
  /** One promise for everyone waiting for an idle queue, so waiters that give up leave nothing behind. */
  private whenIdle: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(private readonly bounds: { perNode: number; global: number }) {}

  add(item: WorkItem): void {
    this.queued.push(item);
    this.pump();
  }

  /** Drops the node's queued items older than `generation`; returns how many. */
  supersede(nodeKey: string, generation: number): number {
    return this.dropWhere((i) => i.nodeKey === nodeKey && i.generation < generation);
  }

  /** Drops every queued item (leadership lost, shutdown). */
  clear(): number {
    return this.dropWhere(() => true);
  }

  get size(): number {
    return this.queued.length;
  }

  get active(): number {
    return this.running;
  }

  /** Heals are running or waiting for a slot. */
  get busy(): boolean {
    return this.running > 0 || this.queued.length > 0;
  }

  /** Resolves the next time nothing runs or waits (at once when that is now). */
  idle(): Promise<void> {
    if (!this.busy) return Promise.resolve();
    if (!this.whenIdle) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.whenIdle = { promise, resolve };
    }
    return this.whenIdle.promise;
  }

  private settleIdle(): void {
    if (this.busy || !this.whenIdle) return;
    this.whenIdle.resolve();
    this.whenIdle = undefined;
  }

  private dropWhere(pred: (i: WorkItem) => boolean): number {
    const drop = this.queued.filter(pred);
    for (const i of drop) this.queued.splice(this.queued.indexOf(i), 1);
    for (const i of drop) i.dropped();
    this.settleIdle();
    return drop.length;
  }

  private next(): number {
    let best = -1;
    for (let i = 0; i < this.queued.length; i++) {
      const item = this.queued[i]!;
      if ((this.runningByNode.get(item.nodeKey) ?? 0) >= this.bounds.perNode) continue;
      // The array is in arrival order, so the first of the best priority is the oldest.
      if (best < 0 || item.priority < this.queued[best]!.priority) best = i;
    }
    return best;
  }

  private pump(): void {
    while (this.running < this.bounds.global) {
      const idx = this.next();
      if (idx < 0) return;
      const [item] = this.queued.splice(idx, 1);
      this.start(item!);
    }
  }

  private start(item: WorkItem): void {
    this.running++;
    this.runningByNode.set(item.nodeKey, (this.runningByNode.get(item.nodeKey) ?? 0) + 1);
    const finish = () => {
      this.running--;
      const n = this.runningByNode.get(item.nodeKey)! - 1;
      if (n === 0) this.runningByNode.delete(item.nodeKey);
      else this.runningByNode.set(item.nodeKey, n);
      this.pump();
      this.settleIdle();
    };
    // run() reports its own failures; a throw here is a bug, but must not wedge a slot.
    item.run().then(finish, finish);
  }
}

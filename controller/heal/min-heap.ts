// A binary min-heap: the work queue's choice of the next node to run, in O(log n).

export class MinHeap<T> {
  private readonly items: T[] = [];

  /** `less(a, b) < 0` when a comes first. */
  constructor(private readonly less: (a: T, b: T) => number) {}

  push(x: T): void {
    const a = this.items;
    a.push(x);
    for (let i = a.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (this.less(a[i]!, a[parent]!) >= 0) break;
      [a[i], a[parent]] = [a[parent]!, a[i]!];
      i = parent;
    }
  }

  /** Removes and returns the first item; undefined when empty. */
  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length === 0 || last === undefined) return top;
    a[0] = last;
    for (let i = 0; ;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && this.less(a[l]!, a[m]!) < 0) m = l;
      if (r < a.length && this.less(a[r]!, a[m]!) < 0) m = r;
      if (m === i) break;
      [a[i], a[m]] = [a[m]!, a[i]!];
      i = m;
    }
    return top;
  }

  clear(): void {
    this.items.length = 0;
  }
}

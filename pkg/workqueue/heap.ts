/**
 * A binary min-heap whose entries know their own position, so an entry already in the heap can be moved when its
 * key gets smaller (`fix`). Used by the delaying queue to order waiting items by ready time.
 *
 * Invariants:
 *  - For every index i > 0: `less(entries[i], entries[parent(i)])` is false (the smallest entry is at index 0).
 *  - `entry.index` is the entry's current position while it is in the heap and -1 after it was popped/removed.
 *
 * Concurrency: plain synchronous data structure; the owner (one queue) is the only caller.
 */

export interface HeapEntry {
  /** Position in the heap, maintained by the heap; -1 when not in a heap. */
  index: number;
}

export class MinHeap<E extends HeapEntry> {
  private readonly entries: E[] = [];
  private readonly less: (a: E, b: E) => boolean;

  constructor(less: (a: E, b: E) => boolean) {
    this.less = less;
  }

  get size(): number {
    return this.entries.length;
  }

  peek(): E | undefined {
    return this.entries[0];
  }

  push(e: E): void {
    e.index = this.entries.length;
    this.entries.push(e);
    this.up(e.index);
  }

  pop(): E | undefined {
    const top = this.entries[0];
    if (top === undefined) return undefined;
    const last = this.entries.pop() as E; // non-empty: top exists
    if (last !== top) {
      this.entries[0] = last;
      last.index = 0;
      this.down(0);
    }
    top.index = -1;
    return top;
  }

  /** Restores the heap order after `e`'s key changed (either direction). */
  fix(e: E): void {
    if (e.index < 0) return;
    if (!this.down(e.index)) this.up(e.index);
  }

  clear(): void {
    for (const e of this.entries) e.index = -1;
    this.entries.length = 0;
  }

  private at(i: number): E {
    return this.entries[i] as E; // callers only pass indexes < size
  }

  private swap(i: number, j: number): void {
    const a = this.at(i);
    const b = this.at(j);
    this.entries[i] = b;
    this.entries[j] = a;
    a.index = j;
    b.index = i;
  }

  private up(i: number): void {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(this.at(i), this.at(p))) break;
      this.swap(i, p);
      i = p;
    }
  }

  /** Sifts down from `i`; returns whether the entry moved. */
  private down(i0: number): boolean {
    const n = this.entries.length;
    let i = i0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      let m = l;
      const r = l + 1;
      if (r < n && this.less(this.at(r), this.at(l))) m = r;
      if (!this.less(this.at(m), this.at(i))) break;
      this.swap(i, m);
      i = m;
    }
    return i > i0;
  }
}

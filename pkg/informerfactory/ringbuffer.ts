/**
 * RingBuffer: an unbounded FIFO on a circular array — client-go's `buffer.RingGrowing` (the per-handler buffer of
 * its processorListener), plus shrinking.
 *
 * Invariants:
 *  - `capacity` is `initialCapacity` × a power of two, and `length <= capacity`.
 *  - `push` into a full ring doubles the capacity (amortised O(1)); `shift` halves it when the ring is at most a
 *    quarter full and above its initial capacity. Hence, after every operation, capacity <= max(initialCapacity,
 *    4 × length): memory follows what is pending, never what passed through, even when the ring never becomes
 *    empty (a consumer that is always slightly behind).
 *  - Slots that hold no element are `undefined`: the ring keeps no reference to an element it handed out.
 *
 * Not thread-safe in any sense that matters here: one event loop, one owner.
 */
export class RingBuffer<T> {
  private readonly initialCapacity: number;
  private slots: Array<T | undefined>;
  private head = 0;
  private len = 0;

  constructor(initialCapacity = 64) {
    if (!Number.isInteger(initialCapacity) || initialCapacity < 1) throw new Error(`invalid ring capacity ${initialCapacity}`);
    this.initialCapacity = initialCapacity;
    this.slots = new Array<T | undefined>(initialCapacity);
  }

  get length(): number {
    return this.len;
  }

  get capacity(): number {
    return this.slots.length;
  }

  push(item: T): void {
    if (this.len === this.slots.length) this.resize(this.slots.length * 2);
    this.slots[(this.head + this.len) % this.slots.length] = item;
    this.len++;
  }

  /** Removes and returns the oldest element; undefined when empty. */
  shift(): T | undefined {
    if (this.len === 0) return undefined;
    const item = this.slots[this.head];
    this.slots[this.head] = undefined;
    this.head = (this.head + 1) % this.slots.length;
    this.len--;
    if (this.len === 0) this.head = 0;
    if (this.slots.length > this.initialCapacity && this.len <= this.slots.length / 4) this.resize(this.slots.length / 2);
    return item;
  }

  /** Drops every element and returns to the initial capacity. */
  clear(): void {
    this.slots = new Array<T | undefined>(this.initialCapacity);
    this.head = 0;
    this.len = 0;
  }

  private resize(capacity: number): void {
    const next = new Array<T | undefined>(capacity);
    for (let i = 0; i < this.len; i++) next[i] = this.slots[(this.head + i) % this.slots.length];
    this.slots = next;
    this.head = 0;
  }
}

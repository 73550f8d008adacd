/**
 * A first-in first-out queue whose `shift` is O(1): the taken slots are cleared (nothing taken
 * stays reachable) and the array is compacted once more than half of it has been taken.
 */
export class Fifo<T> {
  private items: Array<T | undefined> = [];
  private head = 0;

  /** @param compactAt taken slots before a compaction is considered (amortises the copy) */
  constructor(private readonly compactAt = 64) {}

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  /** The oldest item, left in place. */
  peek(): T | undefined {
    return this.head < this.items.length ? this.items[this.head] : undefined;
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head >= this.compactAt && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
}

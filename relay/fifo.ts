/** The ring every empty {@link Fifo} starts with: nothing is allocated until the first push. */
const NONE: never[] = [];

/**
 * A first-in first-out queue on a ring of slots that is reused: pushing and taking allocate
 * nothing once the ring is large enough, taken slots are cleared (nothing taken stays
 * reachable), the ring doubles when full and halves when mostly empty.
 *
 * The slots are kept because a queue that empties and fills again all the time (a member's
 * outbound frames, the delivery's lines) would otherwise leave a new array behind at each turn:
 * under the hostile benchmark's backlog the outboxes' arrays lived long enough to be promoted,
 * the largest part of what the young collections copied (`bench/RESULTS.md`, session 25).
 */
export class Fifo<T> {
  private items: Array<T | undefined> = NONE;
  private head = 0;
  private size = 0;

  /** @param minCapacity slots the ring never shrinks below once used (rounded up to a power of two) */
  constructor(private readonly minCapacity = 8) {
    let capacity = 1;
    while (capacity < minCapacity) capacity *= 2;
    this.minCapacity = capacity;
  }

  get length(): number {
    return this.size;
  }

  push(item: T): void {
    if (this.size === this.items.length) this.resize(Math.max(this.minCapacity, this.items.length * 2));
    this.items[(this.head + this.size) & (this.items.length - 1)] = item;
    this.size++;
  }

  /** The oldest item, left in place. */
  peek(): T | undefined {
    return this.size > 0 ? this.items[this.head] : undefined;
  }

  /** The `i`-th oldest item (0: the oldest), left in place. */
  at(i: number): T | undefined {
    return i >= 0 && i < this.size ? this.items[(this.head + i) & (this.items.length - 1)] : undefined;
  }

  shift(): T | undefined {
    if (this.size === 0) return undefined;
    const item = this.items[this.head];
    this.items[this.head] = undefined;
    this.head = (this.head + 1) & (this.items.length - 1);
    this.size--;
    // a ring that once held a backlog is given back once it is mostly empty (a small one is
    // kept: one that grows and shrinks at every burst would allocate at every burst)
    if (this.items.length > this.minCapacity * 16 && this.size * 8 <= this.items.length) this.resize(this.items.length / 2);
    return item;
  }

  /** Drop every item (the ring shrinks back to its smallest). */
  clear(): void {
    this.items = NONE;
    this.head = 0;
    this.size = 0;
  }

  private resize(capacity: number): void {
    const next = new Array<T | undefined>(capacity);
    for (let i = 0; i < this.size; i++) next[i] = this.items[(this.head + i) & (this.items.length - 1)];
    this.items = next;
    this.head = 0;
  }
}

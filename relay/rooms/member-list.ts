/**
 * A join-ordered list whose cursors are positions: every entry gets the next join sequence
 * number, and a walk continues after the number it stopped at. A cursor holds nothing but that
 * number, so an idle cursor keeps no departed member alive, and it means the same thing on
 * every relay node.
 *
 * Live entries sit in a map by sequence number; the numbers, ascending, sit in an array where a
 * departure leaves a tombstone. A page is a binary search for its start plus the entries it
 * returns; tombstones are swept away whenever a page steps over more than a few, so their cost
 * is paid once, by the departures that made them, never by the size of the list.
 */
export class MemberList<T> {
  private seqs: number[] = [];
  private readonly live = new Map<number, T>();
  private next = 1;

  get size(): number {
    return this.live.size;
  }

  /**
   * Add a value at the end; returns its sequence number: the next one, or `at` when it comes
   * after every number given so far (a room restored on another node keeps its positions).
   */
  append(value: T, at?: number): number {
    const seq = at !== undefined && Number.isSafeInteger(at) && at >= this.next ? at : this.next;
    this.next = seq + 1;
    this.seqs.push(seq);
    this.live.set(seq, value);
    return seq;
  }

  /** Remove the entry with this number (nothing if it is gone already). */
  remove(seq: number): void {
    if (!this.live.delete(seq)) return;
    if (this.live.size === 0) this.seqs = [];
    else if (this.seqs.length > 64 && this.seqs.length > 4 * this.live.size) this.sweep();
  }

  /** Up to `limit` values after position `after` (from the start when `null`), and where to go on. */
  page(after: number | null, limit: number): { values: T[]; last: number | null } {
    let i = after === null ? 0 : this.firstAfter(after);
    const values: T[] = [];
    let last: number | null = null;
    let skipped = 0;
    for (; i < this.seqs.length && values.length < limit; i++) {
      const seq = this.seqs[i]!;
      const value = this.live.get(seq);
      if (value === undefined) {
        skipped++;
        continue;
      }
      values.push(value);
      last = seq;
    }
    // is anything left after this page?
    while (i < this.seqs.length && !this.live.has(this.seqs[i]!)) {
      i++;
      skipped++;
    }
    if (skipped > 32) this.sweep();
    return { values, last: i < this.seqs.length ? last : null };
  }

  /** Index of the first number greater than `seq`. */
  private firstAfter(seq: number): number {
    let lo = 0;
    let hi = this.seqs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.seqs[mid]! <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private sweep(): void {
    this.seqs = this.seqs.filter((seq) => this.live.has(seq));
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (const seq of this.seqs) {
      const value = this.live.get(seq);
      if (value !== undefined) yield value;
    }
  }
}

/**
 * A join-ordered list with O(1) append and removal and cursors that survive churn.
 *
 * A removed node keeps its `next` pointer. Nodes are only ever appended, so following `next`
 * from a removed node reaches the first node that joined after it and is still present (or
 * one removed later, which is skipped the same way). A cursor is therefore just a node: a
 * participant present for a whole walk is returned exactly once, and a page costs what it
 * returns plus the removed nodes it skips, never the size of the list.
 */
export interface ListNode<T> {
  readonly value: T;
  prev: ListNode<T> | null;
  next: ListNode<T> | null;
  removed: boolean;
}

/** A page of a walk: the values, and the node to continue after (`null` at the end). */
export interface Page<T> {
  values: T[];
  last: ListNode<T> | null;
}

export class MemberList<T> {
  private head: ListNode<T> | null = null;
  private tail: ListNode<T> | null = null;
  private count = 0;

  get size(): number {
    return this.count;
  }

  append(value: T): ListNode<T> {
    const node: ListNode<T> = { value, prev: this.tail, next: null, removed: false };
    if (this.tail) this.tail.next = node;
    else this.head = node;
    this.tail = node;
    this.count++;
    return node;
  }

  remove(node: ListNode<T>): void {
    if (node.removed) return;
    if (node.prev) node.prev.next = node.next;
    else this.head = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.tail = node.prev;
    node.removed = true;
    node.prev = null; // `next` stays: cursors resting on this node continue from it
    this.count--;
  }

  /** Up to `limit` values after `after` (from the start when `null`). */
  page(after: ListNode<T> | null, limit: number): Page<T> {
    let node = after ? after.next : this.head;
    while (node?.removed) node = node.next;
    const values: T[] = [];
    let last: ListNode<T> | null = null;
    while (node && values.length < limit) {
      values.push(node.value);
      last = node;
      node = node.next; // `last` is live, so its successor is live too
    }
    return { values, last: node ? last : null };
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let node = this.head; node; node = node.next) yield node.value;
  }
}

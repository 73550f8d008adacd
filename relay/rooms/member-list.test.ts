import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemberList } from './member-list.ts';

function walk(list: MemberList<number>, limit: number, during?: (page: number[]) => void): number[] {
  const seen: number[] = [];
  let after: number | null = null;
  for (;;) {
    const page = list.page(after, limit);
    seen.push(...page.values);
    during?.(page.values);
    if (page.last === null) return seen;
    after = page.last;
  }
}

describe('MemberList', () => {
  it('pages in insertion order and ends with a null cursor', () => {
    const list = new MemberList<number>();
    for (let i = 0; i < 250; i++) list.append(i);
    const first = list.page(null, 100);
    assert.deepEqual(first.values, Array.from({ length: 100 }, (_, i) => i));
    assert.deepEqual(walk(list, 100), Array.from({ length: 250 }, (_, i) => i));
    const exact = new MemberList<number>();
    for (let i = 0; i < 200; i++) exact.append(i);
    const second = exact.page(exact.page(null, 100).last, 100);
    assert.equal(second.values.length, 100);
    assert.equal(second.last, null, 'a page that reaches the end has no cursor');
  });

  it('removal keeps size and order', () => {
    const list = new MemberList<number>();
    const seqs = Array.from({ length: 10 }, (_, i) => list.append(i));
    list.remove(seqs[0]!);
    list.remove(seqs[9]!);
    list.remove(seqs[5]!);
    list.remove(seqs[5]!);
    assert.equal(list.size, 7);
    assert.deepEqual([...list], [1, 2, 3, 4, 6, 7, 8]);
  });

  it('a cursor resting on a removed entry continues after it', () => {
    const list = new MemberList<number>();
    const seqs = Array.from({ length: 10 }, (_, i) => list.append(i));
    const page = list.page(null, 3); // 0 1 2
    list.remove(seqs[2]!);
    list.remove(seqs[3]!);
    list.remove(seqs[4]!);
    assert.deepEqual(list.page(page.last, 3).values, [5, 6, 7]);
  });

  it('item 11: a cursor is a number: it holds no entry, so departed members are not kept', () => {
    const list = new MemberList<{ id: number }>();
    const seqs = Array.from({ length: 1000 }, (_, i) => list.append({ id: i }));
    const cursor = list.page(null, 10).last;
    assert.equal(typeof cursor, 'number');
    for (const seq of seqs.slice(5)) list.remove(seq);
    // the tombstones are swept: the list's own arrays shrink with the departures
    assert.ok((list as unknown as { seqs: number[] }).seqs.length <= 4 * list.size + 64);
    assert.deepEqual(list.page(cursor, 10).values, []);
  });

  it('under churn, everyone present for the whole walk appears exactly once, in order', () => {
    const list = new MemberList<number>();
    const seqOf = new Map<number, number>();
    let next = 0;
    for (; next < 1000; next++) seqOf.set(next, list.append(next));
    const stayers = new Set([...seqOf.keys()].filter((i) => i % 3 === 0));
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const seen = walk(list, 37, () => {
      for (let k = 0; k < 20; k++) {
        const id = Math.floor(rand() * next);
        const seq = seqOf.get(id);
        if (seq !== undefined && !stayers.has(id)) {
          list.remove(seq);
          seqOf.delete(id);
        }
      }
      for (let k = 0; k < 5; k++) seqOf.set(next, list.append(next++));
    });
    for (const id of stayers) assert.equal(seen.filter((s) => s === id).length, 1, `stayer ${id}`);
    assert.equal(new Set(seen).size, seen.length, 'no duplicates');
    assert.deepEqual(seen, [...seen].sort((a, b) => a - b), 'join order');
  });
});

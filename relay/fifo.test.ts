/**
 * The relay's queue (relay/fifo.ts): first in, first out through growth, wrap-around and
 * shrinking, nothing taken left reachable, and no new array while it stays within its ring.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Fifo } from './fifo.ts';

/** The ring's slots (private), read for the tests of its memory. */
const slots = (q: Fifo<unknown>) => (q as unknown as { items: unknown[] }).items;

describe('Fifo', () => {
  it('against an array, over random pushes and shifts: the same items in the same order, peek and at agreeing', () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const q = new Fifo<number>(4);
    const model: number[] = [];
    let next = 0;
    for (let step = 0; step < 200_000; step++) {
      // phases of filling and draining, so the ring grows, wraps and shrinks
      const fill = Math.floor(step / 5000) % 2 === 0 ? 0.7 : 0.3;
      if (random() < fill) {
        q.push(next);
        model.push(next++);
      } else assert.equal(q.shift(), model.shift());
      assert.equal(q.length, model.length);
      assert.equal(q.peek(), model[0]);
      const i = Math.floor(random() * (model.length + 2)) - 1;
      assert.equal(q.at(i), model[i]);
    }
  });

  it('a taken item is no longer held, and a backlog once drained gives its ring back', () => {
    const q = new Fifo<object>(8);
    for (let i = 0; i < 10_000; i++) q.push({ i });
    assert.ok(slots(q).length >= 10_000);
    for (let i = 0; i < 9_990; i++) q.shift();
    assert.equal(q.length, 10);
    assert.ok(slots(q).length <= 256, `a ring of ${slots(q).length} slots kept for 10 items`);
    assert.equal(slots(q).filter((x) => x !== undefined).length, 10, 'only the items still queued are reachable');
    q.clear();
    assert.equal(q.length, 0);
    assert.equal(q.shift(), undefined);
    assert.equal(slots(q).length, 0);
  });

  it('filled and emptied again and again within its size: the same ring, no new array', () => {
    const q = new Fifo<number>(4);
    for (let i = 0; i < 8; i++) q.push(i);
    while (q.length > 0) q.shift();
    const ring = slots(q);
    for (let round = 0; round < 1000; round++) {
      for (let i = 0; i < 1 + (round % 8); i++) q.push(i);
      while (q.length > 0) q.shift();
    }
    assert.equal(slots(q), ring);
  });
});

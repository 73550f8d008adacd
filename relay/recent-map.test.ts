import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RecentMap } from './recent-map.ts';

describe('RecentMap', () => {
  it('keeps at most its capacity, forgetting the entry set longest ago', () => {
    const map = new RecentMap<string, number>(3);
    for (let i = 0; i < 10_000; i++) map.set(`room-${i}`, i);
    assert.equal(map.size, 3);
    assert.deepEqual([...map], [['room-9997', 9997], ['room-9998', 9998], ['room-9999', 9999]]);
  });

  it('setting a key again makes it the newest', () => {
    const map = new RecentMap<string, string>(2);
    map.set('a', 'node-1').set('b', 'node-2').set('a', 'node-3').set('c', 'node-4');
    assert.equal(map.get('b'), undefined, 'b was the oldest');
    assert.deepEqual([...map.entries()], [['a', 'node-3'], ['c', 'node-4']]);
    assert.equal(map.delete('a'), true);
    assert.deepEqual([...map.values()], ['node-4']);
  });

  it('refuses a capacity that is not a whole number of at least one', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) assert.throws(() => new RecentMap(bad), RangeError);
  });
});

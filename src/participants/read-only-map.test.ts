import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deleteEntry, ReadOnlyMap, writeEntry } from './read-only-map.ts';

describe('ReadOnlyMap (room.remoteParticipants)', () => {
  it('is a Map whose mutators throw, and which the SDK still writes', () => {
    const map = new ReadOnlyMap<string, number>();
    assert.ok(map instanceof Map);
    writeEntry(map, 'a', 1);
    writeEntry(map, 'b', 2);
    assert.throws(() => map.set('c', 3), TypeError);
    assert.throws(() => map.delete('a'), TypeError);
    assert.throws(() => map.clear(), TypeError);
    assert.deepEqual([...map], [['a', 1], ['b', 2]]);
    assert.equal(map.size, 2);
    assert.ok(deleteEntry(map, 'a'));
    assert.deepEqual([...map.keys()], ['b']);
    assert.deepEqual(Object.fromEntries(map), { b: 2 });
    assert.deepEqual(new Map(map), new Map([['b', 2]]), 'copies into an ordinary Map');
  });
});

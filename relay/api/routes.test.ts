import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { firstIdsAfter } from './routes.ts';

describe('the server API: pages of rooms', () => {
  it('firstIdsAfter keeps the k smallest ids after the cursor, in order, as a sort of them all would (a page sorted every room of the project at each call)', () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    for (let round = 0; round < 200; round++) {
      const ids = Array.from({ length: Math.floor(random() * 300) }, () => Math.floor(random() * 1000).toString(36) + (random() < 0.1 ? 'é' : ''));
      const unique = [...new Set(ids)];
      const sorted = [...unique].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const after = random() < 0.3 ? null : (sorted[Math.floor(random() * sorted.length)] ?? null);
      const k = 1 + Math.floor(random() * 120);
      const expected = sorted.filter((id) => after === null || id > after).slice(0, k);
      assert.deepEqual(firstIdsAfter(unique.map((id) => ({ id })), after, k), expected, `round ${round}`);
    }
    // rooms in the order that costs most (each id smaller than all kept)
    const descending = Array.from({ length: 10_000 }, (_, i) => ({ id: `room-${String(9_999 - i).padStart(5, '0')}` }));
    assert.deepEqual(firstIdsAfter(descending, null, 3), ['room-00000', 'room-00001', 'room-00002']);
  });
});

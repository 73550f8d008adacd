import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jsonStringBytes } from './json-bytes.ts';

describe('jsonStringBytes', () => {
  it('is the UTF-8 length of JSON.stringify for every kind of character', () => {
    for (const s of ['', 'plain', '"quoted"\\\\', '\u0000\u001f\b\t\n\f\r', 'é', '€', '😀', '\ud800', '\udc00x', 'a\ud83d', '\ud83d\ude00\ud83d', '\u2028\u2029']) {
      assert.equal(jsonStringBytes(s), Buffer.byteLength(JSON.stringify(s)), JSON.stringify(s));
    }
  });

  it('agrees with JSON.stringify on 2,000 random strings of any UTF-16 code units', () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    for (let k = 0; k < 2000; k++) {
      const units: number[] = [];
      const length = Math.floor(random() * 40);
      for (let i = 0; i < length; i++) {
        const kind = random();
        units.push(kind < 0.3 ? Math.floor(random() * 0x80) : kind < 0.5 ? Math.floor(random() * 0x20) : kind < 0.7 ? 0xd800 + Math.floor(random() * 0x800) : Math.floor(random() * 0x10000));
      }
      const s = String.fromCharCode(...units);
      assert.equal(jsonStringBytes(s), Buffer.byteLength(JSON.stringify(s)), JSON.stringify(s));
    }
  });
});

describe('pages and events charged by what they are written as', () => {
  it('a participants.list page of escaped ids and names is charged at least its JSON', async () => {
    const { pageBytes } = await import('../handlers/participants.ts');
    const participants = Array.from({ length: 50 }, (_, i) => ({ id: `\u0001${i}`.padEnd(128, '\u0002'), name: '\u0003'.repeat(256), joinedAt: 1, tier: 'viewer' as const }));
    const page = { participants, nextCursor: null };
    assert.ok(pageBytes(page) >= Buffer.byteLength(JSON.stringify(participants)), `${pageBytes(page)} against ${Buffer.byteLength(JSON.stringify(participants))}`);
  });
});

import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { clusterKey } from './bus.ts';

describe('cluster keys', () => {
  it('are total and injective, lone surrogates included (encodeURIComponent throws on them)', () => {
    assert.equal(clusterKey('home', 'p', 'r\ud800'), 'tessera:home:p:r%uD800');
    assert.notEqual(clusterKey('home', 'p', 'r\ud800'), clusterKey('home', 'p', 'r%uD800'));
    assert.equal(clusterKey('home', 'p', 'a:b'), 'tessera:home:p:a%3Ab');
    const part = fc.string({ unit: 'binary', maxLength: 12 });
    fc.assert(
      fc.property(fc.tuple(part, part), fc.tuple(part, part), (a, b) => {
        const ka = clusterKey('home', ...a);
        const kb = clusterKey('home', ...b);
        return (ka === kb) === (a[0] === b[0] && a[1] === b[1]);
      }),
      { numRuns: 5000 },
    );
  });
});

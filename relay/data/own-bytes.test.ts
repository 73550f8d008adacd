import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OWN_MIN_BYTES, release } from './own-bytes.ts';

describe('own bytes: a frame whose memory is given back once read', () => {
  it('a Buffer that is the whole of its memory is emptied by release, never another Buffer', () => {
    const frame = Buffer.concat([Buffer.alloc(40_000, 7), Buffer.alloc(30_000, 8)]);
    const other = Buffer.alloc(70_000, 9);
    release(frame);
    assert.equal(frame.length, 0, 'its memory was moved away');
    assert.equal(other.length, 70_000);
    assert.equal(other[65_000], 9);
  });

  it('small, pooled and shared Buffers are never released (their memory is not theirs alone)', () => {
    const small = Buffer.from('a small message');
    release(small);
    assert.equal(small.toString(), 'a small message');
    const frame = Buffer.alloc(2 * OWN_MIN_BYTES, 1);
    const view = frame.subarray(0, OWN_MIN_BYTES + 1);
    release(view);
    assert.equal(view.length, OWN_MIN_BYTES + 1, 'a view of a larger buffer');
    assert.equal(frame.length, 2 * OWN_MIN_BYTES);
    const shared = Buffer.from(new SharedArrayBuffer(OWN_MIN_BYTES));
    release(shared);
    assert.equal(shared.length, OWN_MIN_BYTES, 'shared memory cannot be moved');
    const whole = Buffer.allocUnsafeSlow(OWN_MIN_BYTES);
    release(whole);
    release(whole); // twice: harmless
    assert.equal(whole.length, 0);
  });
});

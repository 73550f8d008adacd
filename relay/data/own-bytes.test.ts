import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OWN_MIN_BYTES, ownCopy, release } from './own-bytes.ts';

describe('own bytes: long-lived copies whose memory is given back when dropped', () => {
  it('a kept copy of part of a frame is its own: releasing it empties the copy, never the frame', () => {
    const frame = Buffer.alloc(70_000, 7);
    const view = frame.subarray(100, 65_100);
    const kept = ownCopy(view);
    assert.notEqual(kept.buffer, frame.buffer);
    assert.ok(kept.equals(view));
    release(kept);
    assert.equal(kept.length, 0, 'its memory was moved away');
    assert.equal(frame.length, 70_000, 'the frame (still being written to other members) is untouched');
    assert.equal(frame[65_000], 7);
  });

  it('small, pooled and shared Buffers are never released (their memory is not theirs alone)', () => {
    const small = ownCopy(Buffer.from('a small message'));
    release(small);
    assert.equal(small.toString(), 'a small message');
    const frame = Buffer.alloc(2 * OWN_MIN_BYTES, 1);
    const view = frame.subarray(0, OWN_MIN_BYTES + 1);
    release(view);
    assert.equal(view.length, OWN_MIN_BYTES + 1, 'a view of a larger buffer');
    assert.equal(frame.length, 2 * OWN_MIN_BYTES);
    const kept = ownCopy(Buffer.alloc(OWN_MIN_BYTES, 2));
    release(kept);
    release(kept); // twice: harmless
    assert.equal(kept.length, 0);
  });
});

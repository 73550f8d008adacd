import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isVp8KeyFrameStart } from './vp8.ts';

describe('isVp8KeyFrameStart', () => {
  it('finds the start of a key frame with and without the extended descriptor', () => {
    assert.equal(isVp8KeyFrameStart(Uint8Array.from([0x10, 0x00, 0x00, 0x00, 0x9d, 0x01, 0x2a])), true);
    // X=1, I=1 with a 15-bit picture id (M bit set), then the frame tag
    assert.equal(isVp8KeyFrameStart(Uint8Array.from([0x90, 0x80, 0x81, 0x23, 0x50, 0x02])), true);
    // X=1, I=1 (7-bit), L=1, T=1
    assert.equal(isVp8KeyFrameStart(Uint8Array.from([0x90, 0xe0, 0x12, 0x05, 0x20, 0x10])), true);
  });
  it('rejects delta frames, continuation packets, other partitions and garbage', () => {
    assert.equal(isVp8KeyFrameStart(Uint8Array.from([0x10, 0x01, 0x00])), false, 'inter frame');
    assert.equal(isVp8KeyFrameStart(Uint8Array.from([0x00, 0x00, 0x00])), false, 'not the start of a partition');
    assert.equal(isVp8KeyFrameStart(Uint8Array.from([0x11, 0x00])), false, 'partition 1');
    assert.equal(isVp8KeyFrameStart(Uint8Array.from([0x90, 0x80, 0x81])), false, 'truncated');
    assert.equal(isVp8KeyFrameStart(new Uint8Array(0)), false);
  });
});

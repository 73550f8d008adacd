import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ArenaBytes, ByteArena, LARGE_BLOCK_BYTES, LARGE_FROM_BYTES, SLAB_BYTES, SMALL_BLOCK_BYTES } from './byte-arena.ts';
import { objectOfArray } from './raw-json.ts';

const SLAB = SLAB_BYTES;
/** The blocks `n` bytes take. */
const blocksOf = (n: number) => (n >= LARGE_FROM_BYTES ? Math.ceil(n / LARGE_BLOCK_BYTES) * LARGE_BLOCK_BYTES : Math.max(1, Math.ceil(n / SMALL_BLOCK_BYTES)) * SMALL_BLOCK_BYTES);

/** Bytes whose every position differs from its neighbours', so a block out of place shows. */
function pattern(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 7 + (i >> 10)) & 0xff;
  return b;
}

function read(kept: { length: number; copy(target: Uint8Array, at: number): number }): Buffer {
  const out = Buffer.alloc(kept.length);
  assert.equal(kept.copy(out, 0), kept.length);
  return out;
}

describe('byte arena: kept bytes in blocks the relay reuses', () => {
  it('gives back exactly what was kept, at every size from one byte to more than a slab', () => {
    const arena = new ByteArena();
    const sizes = [1, 127, 128, 129, 1_000, LARGE_FROM_BYTES - 1, LARGE_FROM_BYTES, LARGE_FROM_BYTES + 1, 65_536, 65_536 + 17, 100_003, SLAB + 1, 3 * SLAB - 5];
    const kept = sizes.map((n, i) => ({ src: pattern(n, i), k: arena.keep(pattern(n, i)) }));
    for (const { src, k } of kept) {
      assert.ok(k instanceof ArenaBytes, `${src.length} bytes live in the arena`);
      assert.equal(k.length, src.length);
      assert.ok(read(k).equals(src), `${src.length} bytes read back as kept`);
      assert.equal(k.toString(), src.toString());
    }
    // copied into the middle of a larger target, nothing around it is touched
    const target = Buffer.alloc(70_000, 0xee);
    const some = kept.find(({ src }) => src.length === 65_553)!;
    some.k.copy(target, 100);
    assert.equal(target[99], 0xee);
    assert.ok(target.subarray(100, 100 + 65_553).equals(some.src), 'copied where it was asked to be');
    assert.equal(target[100 + 65_553], 0xee);
  });

  it('small bytes are copied into small blocks: they never keep the Buffer they came in (a slice of an 8 KiB pool chunk)', () => {
    const arena = new ByteArena();
    const frame = Buffer.from('{"type":"event","name":"pubsub.message","data":{"id":"m1","payload":1}}');
    const json = frame.subarray(frame.indexOf('"data":') + 7, frame.length - 1);
    const kept = arena.keep(json);
    assert.ok(kept instanceof ArenaBytes);
    frame.fill(0x20);
    assert.equal(kept.toString(), '{"id":"m1","payload":1}', 'a copy, not a view');
    assert.equal(arena.bytesInUse, SMALL_BLOCK_BYTES);
    assert.equal(arena.slabBytes, SLAB, 'one slab of small blocks');
  });

  it('what a flood of tiny messages holds is its blocks, not the chunks they arrived in', () => {
    const arena = new ByteArena();
    const kept: ArenaBytes[] = [];
    for (let i = 0; i < 10_000; i++) {
      // between two kept messages, 8 KiB of other small Buffers: each kept view would pin a chunk
      for (let k = 0; k < 4; k++) Buffer.from('x'.repeat(2_000));
      kept.push(arena.keep(Buffer.from(`{"id":"m${i}","payload":1}`)));
    }
    assert.equal(arena.bytesInUse, 10_000 * SMALL_BLOCK_BYTES);
    assert.ok(arena.slabBytes <= 2 * SLAB, `${arena.slabBytes} bytes of slabs for 10,000 tiny messages`);
    assert.equal(kept[9_999]!.toString(), '{"id":"m9999","payload":1}');
  });

  it('blocks freed are reused: a history that churns at its budget never grows the arena', () => {
    const arena = new ByteArena();
    const live: ArenaBytes[] = [];
    for (let i = 0; i < 64; i++) live.push(arena.keep(pattern(65_536 + i, i)) as ArenaBytes);
    const high = arena.slabBytes;
    for (let round = 0; round < 2_000; round++) {
      live.shift()!.free();
      live.push(arena.keep(pattern(4_096 + ((round * 7919) % 61_441), round)) as ArenaBytes);
    }
    assert.equal(arena.slabBytes, high, 'no slab was added while the bytes kept stayed within the high-water mark');
    // every survivor still reads back what was kept, though its blocks were another's before
    live.forEach((k, i) => {
      const round = 2_000 - 64 + i;
      assert.ok(read(k).equals(pattern(4_096 + ((round * 7919) % 61_441), round)));
    });
    const inUse = live.reduce((n, k) => n + blocksOf(k.length), 0);
    assert.equal(arena.bytesInUse, inUse);
    const kept = live.reduce((n, k) => n + k.length, 0);
    assert.ok(arena.bytesInUse <= 1.25 * kept, 'blocks in use are at most 5/4 of the bytes kept');
  });

  it('freed bytes can no longer be read; freeing twice gives the blocks back once', () => {
    const arena = new ByteArena();
    const k = arena.keep(pattern(10_000, 1)) as ArenaBytes;
    const used = arena.bytesInUse;
    k.free();
    k.free();
    assert.equal(arena.bytesInUse, used - 10 * LARGE_BLOCK_BYTES);
    assert.throws(() => k.copy(Buffer.alloc(10_000), 0), /freed/);
    const a = arena.keep(pattern(10_000, 2));
    const b = arena.keep(pattern(10_000, 3));
    assert.ok(read(a).equals(pattern(10_000, 2)) && read(b).equals(pattern(10_000, 3)), 'no block was handed out twice');
  });

  it('an answer spliced from kept bytes, in the arena or not, is the JSON of the values', () => {
    const arena = new ByteArena();
    const big = JSON.stringify({ id: 'm1', payload: 'x'.repeat(70_000) });
    const values = [arena.keep(Buffer.from(big)), arena.keep(Buffer.from('{"id":"m2"}')), arena.keep(Buffer.from(JSON.stringify({ id: 'm3', payload: 'é'.repeat(3_000) })))];
    const answer = objectOfArray('messages', values);
    assert.deepEqual(JSON.parse(answer.toString()), { messages: [JSON.parse(big), { id: 'm2' }, { id: 'm3', payload: 'é'.repeat(3_000) }] });
    assert.equal(objectOfArray('shapes', []).toString(), '{"shapes":[]}');
  });
});

import { strict as assert } from 'node:assert';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { RelayError } from '../errors.ts';
import { DiskReserve, statfsFree } from './disk-reserve.ts';

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('disk reserve', () => {
  it('refuses a start once the disk is down to the reserve (RATE_LIMITED, disk-full); 0 turns it off', async () => {
    let free = 10_000;
    let reserve = 5_000;
    const disk = new DiskReserve(() => reserve, async () => free);
    await disk.check('/rec', 'recording');
    free = 5_000;
    await assert.rejects(disk.check('/rec', 'recording'), (err: RelayError) => err.code === 'RATE_LIMITED' && err.reason === 'disk-full' && err.message.startsWith('recording:'));
    reserve = 0;
    await disk.check('/rec', 'recording');
  });

  it('tells each running output once when its disk reaches the reserve, looking at each directory once a turn; the timer stops with the last watch', async () => {
    const free = new Map([
      ['/rec', 10_000],
      ['/hls', 10_000],
    ]);
    const looks: string[] = [];
    const disk = new DiskReserve(
      () => 5_000,
      async (dir) => {
        looks.push(dir);
        return free.get(dir)!;
      },
      10,
    );
    const told: string[] = [];
    const offs = ['a', 'b', 'c'].map((name) => disk.watch('/rec', () => told.push(name)));
    const offHls = disk.watch('/hls', () => told.push('hls'));
    await tick(35);
    assert.deepEqual(told, []);
    const turns = looks.filter((d) => d === '/rec').length;
    assert.ok(turns >= 1 && turns === looks.filter((d) => d === '/hls').length, `one look per directory per turn: ${looks.join()}`);
    offs[2]!();
    free.set('/rec', 4_000);
    await tick(35);
    assert.deepEqual(told.sort(), ['a', 'b'], 'each running recording told once; the stopped one not at all');
    assert.equal(disk.watching, 1, 'told outputs are no longer watched');
    offHls();
    assert.equal(disk.watching, 0);
    const after = looks.length;
    await tick(35);
    assert.equal(looks.length, after, 'nothing is looked at while nothing runs');
  });

  it('reads the free space of the nearest directory that exists (an output directory is made at its first start)', async () => {
    const free = await statfsFree(join(tmpdir(), 'tessera-no-such-dir', 'deeper'));
    assert.ok(Number.isFinite(free) && free > 0);
  });
});

import { strict as assert } from 'node:assert';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { RelayError } from '../errors.ts';
import { DiskQuota, overQuota, type DiskQuotaOptions } from './disk-quota.ts';
import { BLOCK, diskUsage } from './disk-usage.ts';
import { createRecordingDir, deleteRecording, newRecordingId, recordingWritten } from './storage.ts';

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));
const KiB = 1024;

describe('disk quota per project', () => {
  const root = mkdtempSync(join(tmpdir(), 'tessera-quota-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  /** A project's directory with `files` files of `size` bytes each. */
  const project = (name: string, files: number, size: number) => {
    const dir = join(root, name);
    mkdirSync(join(dir, 'room'), { recursive: true });
    for (let i = 0; i < files; i++) writeFileSync(join(dir, 'room', `f${i}`), Buffer.alloc(size));
    return dir;
  };

  /**
   * A quota of `quota` bytes over `dir` that counts its walks; with `firstWaits`, the first walk
   * waits for `release()`; `onWalk(n)` runs as walk n begins.
   */
  const counted = (dir: string, quota: number, options: DiskQuotaOptions, firstWaits = false, onWalk: (n: number) => unknown = () => undefined) => {
    let walks = 0;
    let release: () => void = () => undefined;
    const q = new DiskQuota(
      () => quota,
      async () => {
        walks++;
        if (firstWaits && walks === 1) await new Promise<void>((r) => (release = r));
        onWalk(walks);
        return [dir];
      },
      options,
    );
    return { q, walks: () => walks, release: () => release() };
  };
  const firstWalkWaits = (dir: string, quota: number, onWalk?: (n: number) => unknown) => counted(dir, quota, { walkEveryMs: 60_000 }, true, onWalk);

  it('refuses a start at or over the quota (RATE_LIMITED, disk-quota), for that project only; 0 turns it off', async () => {
    const dirs = new Map([
      ['big', project('big', 4, 16 * KiB)],
      ['small', project('small', 1, 100)],
    ]);
    let quota = 64 * KiB;
    const q = new DiskQuota(() => quota, async (p) => [dirs.get(p)!]);
    // 4 files of 16 KiB and their room's directory: over 64 KiB
    await assert.rejects(q.check('big', 'recording'), (err: RelayError) => err.code === 'RATE_LIMITED' && err.reason === 'disk-quota' && err.message.startsWith('recording:'));
    await q.check('small', 'recording');
    assert.equal(await q.usage('small'), 2 * BLOCK, 'a file and a directory: a block each');
    quota = 0;
    await q.check('big', 'hls');
  });

  it('walks a project at most once per interval; what the relay adds or deletes meanwhile is counted without a walk', async () => {
    const dir = project('cached', 2, 8 * KiB);
    let now = 0;
    let walks = 0;
    const q = new DiskQuota(
      () => 1024 * KiB,
      async () => {
        walks++;
        return [dir];
      },
      { walkEveryMs: 1000, now: () => now },
    );
    const first = await q.usage('cached');
    assert.equal(first, 2 * 8 * KiB + BLOCK, 'two 8 KiB files and their directory');
    await Promise.all([q.usage('cached'), q.check('cached', 'recording'), q.usage('cached')]);
    assert.equal(walks, 1, 'looks within the interval use the walk');
    writeFileSync(join(dir, 'room', 'by-hand'), Buffer.alloc(8 * KiB));
    assert.equal(await q.usage('cached'), first, 'a file added behind the relay is seen at the next walk only');
    q.freed('cached', 8 * KiB);
    assert.equal(await q.usage('cached'), first - 8 * KiB, 'a deletion counts at once');
    assert.equal(walks, 1);
    now = 1000;
    assert.equal(await q.usage('cached'), first + 8 * KiB, 'the next walk sees the disk as it is (the deletion was only said)');
    assert.equal(walks, 2);
  });

  it('a deletion while a walk is under way is not taken off twice: it counts as still there until the next look, which walks again', async () => {
    const dir = project('during', 2, 8 * KiB);
    const { q, walks, release } = firstWalkWaits(dir, 1024 * KiB);
    const looking = q.usage('during');
    await tick(5);
    // deleted while the walk waits: the walk will not see the file
    rmSync(join(dir, 'room', 'f0'));
    q.freed('during', 8 * KiB);
    release();
    const one = 8 * KiB + BLOCK;
    assert.equal(await looking, one, 'what the walk saw, the deletion not taken off again (was 8 KiB less)');
    assert.equal(await q.usage('during'), one, 'the next look walks again');
    assert.equal(walks(), 2);
  });

  it('a running output with more entries than are looked at stops alone (its bytes were a lower bound); the project\'s others go on; settled, it makes the next look walk', async () => {
    const dir = project('crowded', 0, 0);
    const { q, walks } = counted(dir, 1024 * KiB, { intervalMs: 10, walkEveryMs: 60_000, maxOutputEntries: 5 });
    const out = join(dir, 'room', 'run');
    const other = join(dir, 'room', 'other');
    mkdirSync(out);
    mkdirSync(other);
    const told: number[] = [];
    const otherTold: number[] = [];
    const watch = q.watch('crowded', out, (used) => told.push(used));
    const otherWatch = q.watch('crowded', other, (used) => otherTold.push(used));
    for (let i = 0; i < 5; i++) writeFileSync(join(out, `s${i}`), 'x');
    await tick(40);
    assert.deepEqual(told, [], 'five small files: measured, under the quota');
    writeFileSync(join(out, 's5'), 'x');
    await tick(40);
    assert.deepEqual(told, [Infinity], 'six: more than are looked at (was: five blocks counted, under the quota)');
    assert.deepEqual(otherTold, [], "the project's other output goes on");
    await q.check('crowded', 'recording');
    assert.match(overQuota('hls', Infinity, 1024 * KiB).message, /more files and directories than the relay counts/);
    await otherWatch.settle();
    const before = walks();
    await watch.settle();
    await q.usage('crowded');
    assert.equal(walks(), before + 1, 'the next look walks the project again');
  });

  it('a start that waited for a walk during which files were deleted walks once more before refusing (an HLS restart deletes its old run, then checks)', async () => {
    const dir = project('restart', 1, 32 * KiB);
    // (the run's files are gone by the next walk; the one under way had read them before)
    const { q, walks, release } = firstWalkWaits(dir, 32 * KiB, (n) => n === 2 && rmSync(join(dir, 'room', 'f0')));
    // another look's walk is under way (a sweep, another room's start) and counts the old run
    const other = q.usage('restart');
    await tick(5);
    q.freed('restart', 32 * KiB);
    const start = q.check('restart', 'hls');
    release();
    await other;
    await start; // was refused: the walk it waited for had counted the deleted run
    assert.equal(walks(), 2);
  });

  it("a running output's directory deleted before its output settled (an HLS restart right after its run failed at the quota) stops counting at once, during a walk too (it refused that restart, on CI)", async () => {
    const dir = project('settling', 0, 0);
    const run = join(dir, 'room', 'run');
    mkdirSync(run);
    writeFileSync(join(run, 'seg0.ts'), Buffer.alloc(300 * KiB));
    // the shared timer measures the run, then waits for a walk that waits here
    const { q, release } = counted(dir, 256 * KiB, { intervalMs: 10, walkEveryMs: 60_000 }, true);
    const watch = q.watch('settling', run, () => undefined);
    await tick(40);
    // the room's next start deletes the run while the walk is under way
    rmSync(run, { recursive: true, force: true });
    q.freed('settling', 300 * KiB, run);
    const start = q.check('settling', 'hls');
    release();
    await start; // was refused: the run still counted as a running output's 300 KiB
    await watch.settle();
    assert.ok((await q.usage('settling')) < 256 * KiB, 'nothing of the run counts once its output settles');
  });

  it('running outputs are measured by one shared timer; past the quota every running output of that project is told once, never another project', async () => {
    const dirs = new Map([
      ['a', project('a', 0, 0)],
      ['b', project('b', 0, 0)],
    ]);
    let walks = 0;
    const q = new DiskQuota(
      () => 64 * KiB,
      async (p) => {
        walks++;
        return [dirs.get(p)!];
      },
      { intervalMs: 10, walkEveryMs: 60_000 },
    );
    const run = (p: string, name: string) => {
      const d = join(dirs.get(p)!, 'room', name);
      mkdirSync(d);
      return d;
    };
    const a1 = run('a', 'rec1');
    const a2 = run('a', 'rec2');
    const b1 = run('b', 'rec1');
    const told: string[] = [];
    const w1 = q.watch('a', a1, () => told.push('a1'));
    const w2 = q.watch('a', a2, () => told.push('a2'));
    const wb = q.watch('b', b1, () => told.push('b1'));
    assert.equal(q.watching, 3);
    writeFileSync(join(a1, 'part'), Buffer.alloc(32 * KiB));
    writeFileSync(join(b1, 'part'), Buffer.alloc(32 * KiB));
    await tick(40);
    assert.deepEqual(told, [], 'under the quota');
    writeFileSync(join(a2, 'part'), Buffer.alloc(40 * KiB));
    await tick(40);
    assert.deepEqual(told.sort(), ['a1', 'a2'], "both of a's outputs, once each; b is under its own quota");
    await tick(40);
    assert.equal(told.length, 2, 'told once');
    const walksBefore = walks;
    await w1.settle();
    assert.equal(q.watching, 2);
    assert.ok((await q.usage('a')) > 64 * KiB, "a stopped output's files still count");
    assert.equal(walks, walksBefore, 'without a walk');
    wb.quiet();
    writeFileSync(join(b1, 'more'), Buffer.alloc(64 * KiB));
    await tick(40);
    assert.deepEqual(told.sort(), ['a1', 'a2'], 'a quieted output is not told');
    await wb.settle();
    await w2.settle();
    assert.equal(q.watching, 0, 'the timer stops with the last watch');
  });

  it('a project with more files than a walk looks at counts as over its quota', async () => {
    const dir = project('many', 30, 1);
    const q = new DiskQuota(() => 1024 * 1024 * KiB, async () => [dir], { maxEntries: 20 });
    await assert.rejects(q.check('many', 'hls'), (err: RelayError) => err.reason === 'disk-quota' && /more files and directories than the relay counts \(100000 a project/.test(err.message));
  });

  it('never follows a link and never reads past its depth', async () => {
    const outside = project('outside', 8, 64 * KiB);
    const dir = project('linked', 0, 0);
    symlinkSync(outside, join(dir, 'room', 'link-to-dir'));
    symlinkSync(join(outside, 'room', 'f0'), join(dir, 'room', 'link-to-file'));
    const usage = await diskUsage([dir], { maxEntries: 100, maxDepth: 4 });
    assert.deepEqual(usage, { bytes: 3 * BLOCK, entries: 3, complete: true }, 'the room directory and two links: a block each');
    mkdirSync(join(dir, 'room', 'a', 'b', 'c', 'd'), { recursive: true });
    const shallow = await diskUsage([dir], { maxEntries: 100, maxDepth: 2 });
    assert.equal(shallow.entries, 4, 'room, its two links, a: nothing below level 2 is read');
  });

  it('deletes a finished recording only: never one being written, never through a link', async () => {
    const rec = join(root, 'recordings');
    const id = newRecordingId();
    const path = await createRecordingDir(rec, 'p', 'r', id);
    writeFileSync(join(path, 'timeline.jsonl'), Buffer.alloc(10 * KiB));
    assert.deepEqual(await deleteRecording(rec, 'p', 'r', id), { deleted: false, why: 'writing' });
    recordingWritten(path);
    assert.deepEqual(await deleteRecording(rec, 'q', 'r', id), { deleted: false, why: 'missing' }, "another project's");
    assert.deepEqual(await deleteRecording(rec, 'p', 'r', '../r'), { deleted: false, why: 'missing' }, 'not an id');
    assert.deepEqual(await deleteRecording(rec, 'p', 'r', id), { deleted: true, bytes: 12 * KiB + BLOCK });
    assert.deepEqual(await deleteRecording(rec, 'p', 'r', id), { deleted: false, why: 'missing' }, 'once');
    const other = newRecordingId();
    const target = await createRecordingDir(rec, 'p', 'elsewhere', other);
    recordingWritten(target);
    symlinkSync(target, join(rec, 'p', 'r', other));
    assert.deepEqual(await deleteRecording(rec, 'p', 'r', other), { deleted: false, why: 'missing' }, 'a link in place of a recording');
    assert.ok((await diskUsage([target], { maxEntries: 10, maxDepth: 1 })).complete);
  });
});

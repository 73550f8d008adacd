/**
 * A composite stopped while it starts (the output stopped, or the room ended, while the first
 * `start` awaited its directory) leaves nothing behind: no tap on the room's media, no timer.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CompositeRun } from './composite-run.ts';

describe('CompositeRun stopped while it starts', () => {
  it('leaves no tap and no check timer, and says it never wrote', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-composite-run-'));
    try {
      let taps = 0;
      const run = new CompositeRun(
        () => {
          taps++;
          return () => taps--;
        },
        { ffmpeg: '/nonexistent/ffmpeg', workDir: join(dir, 'work'), width: 320, height: 240, fps: 10, videoKbps: 100, roomName: 'r', font: null, nameOf: (id) => id, output: () => [], failed: () => undefined, log: { debug() {}, info() {}, warn() {}, error() {} } as never },
      );
      const starting = run.start(); // awaits its directory
      const stopping = run.stop();
      await Promise.allSettled([starting, stopping]);
      assert.equal(taps, 0, 'no tap left on the room');
      assert.equal((run as unknown as { check: unknown }).check ?? null, null, 'no check timer');
      assert.equal(await run.whenFirstOutput(), false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

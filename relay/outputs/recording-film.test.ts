import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { findExecutable } from './ffmpeg/process.ts';
import { concatList, joinFilm, planPieces } from './recording-film.ts';

const FFMPEG = findExecutable('ffmpeg');
const skip = FFMPEG ? false : 'ffmpeg is not installed (apt-get install ffmpeg)';

describe('a recording film', () => {
  it('fills the time before the first run and between runs with the card, skips runs that wrote nothing', () => {
    const runs = [
      { run: 0, seconds: 4, startedAt: 11_000 },
      { run: 1, seconds: 0, startedAt: null },
      { run: 2, seconds: 3, startedAt: 16_500 },
      { run: 3, seconds: 2, startedAt: 19_550 },
    ];
    assert.deepEqual(planPieces(runs, 10_000), [{ card: 1 }, { part: 0 }, { card: 1.5 }, { part: 2 }, { part: 3 }]);
    assert.equal(concatList([{ card: 125 }, { part: 2 }]), 'ffconcat version 1.0\nfile card.ts\noutpoint 60.000\nduration 60.000\nfile card.ts\noutpoint 60.000\nduration 60.000\nfile card.ts\noutpoint 5.000\nduration 5.000\nfile part-2.ts\n');
  });

  it('joined by ffmpeg, lasts as long as its parts and gaps: gaps shorter than MPEG-TS\'s 1.4 s start are kept too', { skip }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-film-'));
    try {
      // parts as a composite run writes them: MPEG-TS, whose clock starts at 1.4 s
      for (const [run, seconds] of [[0, 0.5], [1, 3]] as const) {
        execFileSync(FFMPEG!, ['-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc=s=320x240:r=25,format=yuv420p', '-f', 'lavfi', '-i', 'sine=r=48000', '-t', String(seconds), '-c:v', 'libx264', '-preset', 'veryfast', '-c:a', 'aac', '-f', 'mpegts', join(dir, `part-${run}.ts`)]);
      }
      const pieces = [{ card: 1.2 }, { part: 0 }, { card: 0.8 }, { part: 1 }, { part: 7 }];
      const dest = join(dir, 'film.mp4');
      const film = await joinFilm({ ffmpeg: FFMPEG!, partsDir: dir, pieces, size: { width: 320, height: 240, fps: 25, videoKbps: 300 }, roomName: 'film', dest });
      assert.deepEqual(film, { gaps: 2 });
      const probe = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name,duration', '-of', 'json', dest]).toString()) as { streams: Array<{ codec_name: string; duration: string }> };
      assert.deepEqual(probe.streams.map((s) => s.codec_name).sort(), ['aac', 'h264']);
      // 1.2 + 0.5 + 0.8 + 3 (part 7 was never written): each stream, within a frame or two
      for (const s of probe.streams) assert.ok(Math.abs(Number(s.duration) - 5.5) < 0.15, `${s.codec_name}: ${s.duration} s for 5.5 s`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('nothing written: no film', { skip }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-film-'));
    try {
      const film = await joinFilm({ ffmpeg: FFMPEG!, partsDir: dir, pieces: [{ card: 3 }, { part: 0 }], size: { width: 320, height: 240, fps: 25, videoKbps: 300 }, roomName: 'film', dest: join(dir, 'x.mp4') });
      assert.equal(film, null);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

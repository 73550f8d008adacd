import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { asrModel, checkAsr, DEFAULT_ASR_MODEL } from './local-engine.ts';

describe('checkAsr', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-asr-check-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  /** An ffmpeg that notes each run in `runs` and then is `then` (the real ffmpeg, or a failure). */
  const counting = (name: string, then: string) => {
    const path = join(dir, name);
    writeFileSync(path, `#!/bin/sh\necho run >> ${join(dir, `${name}.runs`)}\n${then}\n`);
    chmodSync(path, 0o755);
    return { path, runs: () => readFileSync(join(dir, `${name}.runs`), 'utf8').split('\n').filter(Boolean).length };
  };

  it('one ffmpeg checks the model for every start, however many ask at once or later (a start and stop loop ran one each)', async () => {
    const ffmpeg = counting('ffmpeg-ok', 'exec ffmpeg "$@"');
    const model = asrModel(DEFAULT_ASR_MODEL, 'en');
    await Promise.all(Array.from({ length: 20 }, () => checkAsr(ffmpeg.path, model)));
    await checkAsr(ffmpeg.path, model);
    assert.equal(ffmpeg.runs(), 1);
  });

  it('a failed check is shared too, and kept for a while rather than run again at every start', async () => {
    const ffmpeg = counting('ffmpeg-broken', 'exit 1');
    const model = asrModel(DEFAULT_ASR_MODEL, 'en');
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => checkAsr(ffmpeg.path, model)));
    assert.ok(results.every((r) => r.status === 'rejected' && (r.reason as { reason?: string }).reason === 'ffmpeg-failed'));
    await assert.rejects(checkAsr(ffmpeg.path, model), (err: { reason?: string }) => err.reason === 'ffmpeg-failed');
    assert.equal(ffmpeg.runs(), 1);
  });

  it('a check that hangs is ended at its deadline and fails (kept pending, it held every later start)', async () => {
    const ffmpeg = counting('ffmpeg-hangs', 'exec sleep 60');
    const model = asrModel(DEFAULT_ASR_MODEL, 'en');
    const began = Date.now();
    await assert.rejects(checkAsr(ffmpeg.path, model, 300), (err: { reason?: string; message: string }) => err.reason === 'ffmpeg-failed' && /took over/.test(err.message));
    assert.ok(Date.now() - began < 5000);
  });
});

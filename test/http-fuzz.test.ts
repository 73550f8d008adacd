import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestRelay, type TestRelay } from './helpers.ts';
import { httpFuzz, rawHttp, request } from './fuzz/http.ts';

/** The short HTTP fuzz run of `npm test`; `npm run fuzz` sends many more. */
describe('HTTP fuzzing (short run)', () => {
  let t: TestRelay;
  let dir: string;
  const problems: unknown[] = [];
  const note = (e: unknown) => problems.push(e);
  before(async () => {
    process.on('unhandledRejection', note);
    process.on('uncaughtException', note);
    dir = mkdtempSync(join(tmpdir(), 'tessera-http-fuzz-'));
    t = await startTestRelay({ recordingsDir: join(dir, 'rec'), hlsDir: join(dir, 'hls') });
  });
  after(async () => {
    process.off('unhandledRejection', note);
    process.off('uncaughtException', note);
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('item 1: 3,000 generated requests (methods, targets, escapes, headers, bodies) over raw TCP: every one answered or refused by the parser, /healthz 200 after each batch, no crash', async () => {
    // real recordings and an HLS run, so that generated paths reach the file-serving code too
    const host = await t.join({ token: t.token({ roomId: 'fuzz', participantId: 'host', grant: { canRecord: true, canHls: true } }) });
    const recording = (await host.recording.start()).info!.recording!;
    await host.recording.stop();
    const run = (await host.hls.start()).info!.playlist!.split('/')[2]!;
    const authorizations = [t.token({ roomId: 'fuzz', grant: { canRecord: true } }), t.token({ roomId: 'other', grant: { canRecord: true } }), t.token({ roomId: 'fuzz', grant: {} })];
    const report = await httpFuzz({ port: t.relay.port, total: 3000, seed: 11, known: [recording, run, `${recording}/timeline.jsonl`, `${run}/index.m3u8`], authorizations });
    assert.equal(report.requests, 3000);
    assert.equal(report.unhealthy, 0, '/healthz answered 200 after every batch');
    assert.deepEqual(problems, [], 'no uncaught exception or rejection');
    assert.equal(report.statuses['500'] ?? 0, 0, `no internal errors (${JSON.stringify(report.statuses)})`);
    assert.ok((report.statuses['200'] ?? 0) > 0 && (report.statuses['400'] ?? 0) > 0 && (report.statuses['404'] ?? 0) > 0, JSON.stringify(report.statuses));
    assert.equal((await rawHttp(t.relay.port, request(`/recordings/${recording}/timeline.jsonl`, { Authorization: `Bearer ${authorizations[0]}` }))).status, 200, 'still serving files');
    await host.hls.stop();
    await host.leave();
  });
});

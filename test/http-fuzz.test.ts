import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { signJwt } from '../src/server/jwt.ts';
import { API_KEY, SECRET, startTestRelay, type TestRelay } from './helpers.ts';
import { apiRequest, httpFuzz, rawHttp, request } from './fuzz/http.ts';

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
    t = await startTestRelay({ recordingsDir: join(dir, 'rec'), hlsDir: join(dir, 'hls'), apiRate: 100_000 });
  });
  after(async () => {
    process.off('unhandledRejection', note);
    process.off('uncaughtException', note);
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('item 1: 3,000 generated requests (methods, targets, escapes, headers, bodies; files and the server API) over raw TCP: every one answered or refused by the parser, /healthz 200 after each batch, no crash', async () => {
    // real recordings and an HLS run, so that generated paths reach the file-serving code too
    const host = await t.join({ token: t.token({ roomId: 'fuzz', participantId: 'host', grant: { canRecord: true, canHls: true } }) });
    const recording = (await host.recording.start()).info!.recording!;
    await host.recording.stop();
    const run = (await host.hls.start()).info!.playlist!.split('/')[2]!;
    const now = Math.floor(Date.now() / 1000);
    // server-API tokens too: the routes under /api/v1 are reached past the token check
    const admin = signJwt({ iss: API_KEY, admin: true, exp: now + 300 }, SECRET);
    const authorizations = [t.token({ roomId: 'fuzz', grant: { canRecord: true } }), t.token({ roomId: 'other', grant: { canRecord: true } }), t.token({ roomId: 'fuzz', grant: {} }), admin, admin];
    const report = await httpFuzz({ port: t.relay.port, total: 3000, seed: 11, known: [recording, run, `${recording}/timeline.jsonl`, `${run}/index.m3u8`], authorizations });
    assert.equal(report.requests, 3000);
    assert.equal(report.unhealthy, 0, '/healthz answered 200 after every batch');
    assert.deepEqual(problems, [], 'no uncaught exception or rejection');
    assert.equal(report.statuses['500'] ?? 0, 0, `no internal errors (${JSON.stringify(report.statuses)})`);
    assert.ok((report.statuses['200'] ?? 0) > 0 && (report.statuses['400'] ?? 0) > 0 && (report.statuses['404'] ?? 0) > 0, JSON.stringify(report.statuses));
    assert.equal((await rawHttp(t.relay.port, request(`/recordings/${recording}/timeline.jsonl`, { Authorization: `Bearer ${authorizations[0]}` }))).status, 200, 'still serving files');
    assert.equal((await rawHttp(t.relay.port, request('/api/v1/rooms/fuzz', { Authorization: `Bearer ${admin}` }))).status, 200, 'still serving the API');
    await host.hls.stop();
    await host.leave();
  });

  it('item 1b: 2,000 generated server-API requests with a real server-API token (routes, made-up ids, methods, content types, JSON of any shape, lying lengths): no 500, no crash, the API still answers', async () => {
    const members = await Promise.all(['api-a', 'api-b'].map((roomId) => t.join({ token: t.token({ roomId, participantId: 'host', grant: {} }) })));
    const admin = signJwt({ iss: API_KEY, admin: true, exp: Math.floor(Date.now() / 1000) + 300 }, SECRET);
    const report = await httpFuzz({ port: t.relay.port, total: 2000, seed: 23, arbitrary: apiRequest(admin, ['api-a', 'api-b']) });
    assert.equal(report.unhealthy, 0, '/healthz answered 200 after every batch');
    assert.deepEqual(problems, [], 'no uncaught exception or rejection');
    assert.equal(report.statuses['500'] ?? 0, 0, `no internal errors (${JSON.stringify(report.statuses)})`);
    for (const status of ['200', '400', '404', '405', '413', '415']) assert.ok((report.statuses[status] ?? 0) > 0, `some ${status} (${JSON.stringify(report.statuses)})`);
    assert.equal((await rawHttp(t.relay.port, request('/api/v1/rooms', { Authorization: `Bearer ${admin}` }))).status, 200, 'still serving the API');
    await Promise.all(members.map((m) => m.leave().catch(() => undefined)));
  });
});

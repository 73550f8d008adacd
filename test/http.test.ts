import assert from 'node:assert/strict';
import fs, { mkdtempSync, rmSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { encodeId } from '../relay/outputs/storage.ts';
import { startTestRelay, type TestRelay } from './helpers.ts';
import { rawHttp, request } from './fuzz/http.ts';

describe('issue 11: the HTTP surface answers anything and survives', () => {
  let t: TestRelay;
  let port: number;
  let dir: string;
  const problems: unknown[] = [];
  const note = (e: unknown) => problems.push(e);
  const auth = (roomId: string) => ({ Authorization: `Bearer ${t.token({ roomId, grant: { canRecord: true } })}` });

  before(async () => {
    process.on('uncaughtException', note);
    process.on('unhandledRejection', note);
    dir = mkdtempSync(join(tmpdir(), 'tessera-http-'));
    t = await startTestRelay({ recordingsDir: join(dir, 'rec'), hlsDir: join(dir, 'hls') });
    port = t.relay.port;
  });
  after(async () => {
    process.off('uncaughtException', note);
    process.off('unhandledRejection', note);
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The relay still serves: /healthz answers, a room still works, nothing was thrown. */
  async function stillServing(): Promise<void> {
    assert.equal((await rawHttp(port, request('/healthz'))).status, 200, '/healthz answers');
    const room = await t.join({ token: t.token({ roomId: `alive-${Math.random()}`, grant: { canPublishData: true } }) });
    await room.pubsub.publish('ping', 'pong');
    await room.leave();
    assert.deepEqual(problems, [], 'no uncaught exception or rejection');
  }

  async function recording(roomId: string): Promise<{ id: string; path: string }> {
    const host = await t.join({ token: t.token({ roomId, participantId: 'host', grant: { canRecord: true } }) });
    const status = await host.recording.start();
    await host.recording.stop();
    await host.leave();
    const id = status.info!.recording!;
    return { id, path: join(dir, 'rec', encodeId('default'), encodeId(roomId), id) };
  }

  it('item 1: GET // answers 400 and the relay keeps serving', async () => {
    const res = await rawHttp(port, request('//'));
    assert.equal(res.status, 400);
    await stillServing();
  });

  it('item 1: request targets that are not URLs each get an answer (absolute-form, *, //, 8 KB, ?/# tricks, NUL, raw bytes, UTF-8)', async () => {
    const cases: Array<[string | Buffer, number]> = [
      ['http://x/', 400],
      ['http://relay/healthz', 400],
      ['*', 400],
      ['///recordings', 400],
      ['/recordings//x', 400],
      [`/${'a'.repeat(8192)}`, 414],
      [`/recordings/${'%2f'.repeat(2000)}`, 414],
      ['/healthz?x=%zz#frag', 200],
      ['/healthz#/../metrics', 200],
      ['/healthz?/../recordings', 200],
      ['/recordings?/../healthz', 401],
      ['/%00', 426],
      ['/h%C3%A9', 426],
      ['/%F0%9F%98%80', 426],
      ['/', 426],
      ['/nowhere', 426],
    ];
    for (const [target, status] of cases) {
      const res = await rawHttp(port, request(String(target)));
      assert.equal(res.status, status, `${String(target).slice(0, 40)} → ${status}`);
    }
    // bytes Node's parser refuses itself (NUL, raw UTF-8, control characters): a 400, no crash
    for (const raw of ['/\u0000', '/é', '/\u0001x', '/a b/c']) {
      const res = await rawHttp(port, Buffer.concat([Buffer.from('GET '), Buffer.from(raw, 'utf8'), Buffer.from(' HTTP/1.1\r\nConnection: close\r\n\r\n')]));
      assert.equal(res.status, 400, JSON.stringify(raw));
    }
    await stillServing();
  });

  it('item 1: a known path with another method is 405 with Allow; HEAD is GET without a body; unknown paths keep the WebSocket hint', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH']) {
      for (const path of ['/healthz', '/metrics', '/recordings', '/recordings/a/b', '/hls/a/b']) {
        const res = await rawHttp(port, request(path, {}, method));
        assert.equal(res.status, 405, `${method} ${path}`);
        assert.equal(res.headers.allow, 'GET, HEAD');
      }
    }
    const head = await rawHttp(port, request('/healthz', {}, 'HEAD'), 1000);
    assert.equal(head.status, 200);
    assert.equal(head.body.length, 0);
    assert.ok(Number(head.headers['content-length']) > 0, 'HEAD tells the length GET would send');
    assert.equal((await rawHttp(port, request('/nowhere', {}, 'POST'))).status, 426);
    await stillServing();
  });

  it('item 1: any header: huge, duplicated, garbage Authorization — an answer, never a crash', async () => {
    const headers: Array<Record<string, string>> = [
      { Authorization: 'Bearer' },
      { Authorization: 'Bearer a.b.c' },
      { Authorization: `Bearer ${'x'.repeat(12_000)}` },
      { Authorization: 'Basic Zm9vOmJhcg==' },
      { Authorization: 'Bearer ..' },
      { 'X-Big': 'y'.repeat(15_000) },
      { 'Content-Length': 'nope' },
      { 'Transfer-Encoding': 'chunked, gzip' },
      { Range: 'bytes=99999999999-' },
    ];
    for (const h of headers) {
      for (const path of ['/recordings', '/metrics', '/hls/0123456789abcdef0123456789abcdef/index.m3u8']) {
        const res = await rawHttp(port, request(path, h));
        assert.ok(res.status !== null && res.status < 500, `${path} ${JSON.stringify(h).slice(0, 60)} → ${res.status}`);
      }
    }
    const twice = `GET /recordings HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\nConnection: close\r\n\r\n`;
    assert.equal((await rawHttp(port, twice)).status, 401);
    await stillServing();
  });

  it('item 2: bad %-escapes under /recordings and /hls answer 400, never a crash', async () => {
    for (const target of ['/recordings/%', '/recordings/%zz', '/recordings/x/%', '/recordings/%E0%A4%A', '/recordings/%C3%28/x', '/recordings/%ff/timeline.jsonl', '/hls/%/index.m3u8', '/hls/x/%g0', '/%']) {
      const res = await rawHttp(port, request(target, auth('r2')));
      assert.equal(res.status, 400, target);
    }
    await stillServing();
  });

  it('item 2: escapes never reach outside the room: %2f, %2e%2e and dot segments are 404', async () => {
    const { id } = await recording('r2b');
    for (const target of [`/recordings/${id}%2ftimeline.jsonl`, `/recordings/..%2f..%2f${id}/timeline.jsonl`, `/recordings/%2e%2e/timeline.jsonl`, `/recordings/${id}/..`, `/hls/../index.m3u8`]) {
      const res = await rawHttp(port, request(target, auth('r2b')));
      assert.ok(res.status === 404 || res.status === 400, `${target} → ${res.status}`);
    }
    assert.equal((await rawHttp(port, request(`/recordings/${id}/timeline.jsonl`, auth('r2b')))).status, 200);
    assert.equal((await rawHttp(port, request(`/recordings/${encodeURIComponent(id)}/timeline%2Ejsonl`, auth('r2b')))).status, 200, 'an escaped name is the same name');
  });

  it('item 4: a recording file deleted between the listing and the download is a 404; the relay keeps serving', async () => {
    const { id, path } = await recording('r4a');
    const list = JSON.parse((await rawHttp(port, request('/recordings', auth('r4a')))).body.toString()) as { recordings: Array<{ file: string; url: string }> };
    assert.deepEqual(list.recordings.map((r) => r.file), ['composite.mp4', 'timeline.jsonl']);
    unlinkSync(join(path, 'timeline.jsonl'));
    assert.equal((await rawHttp(port, request(list.recordings[1]!.url, auth('r4a')))).status, 404);
    assert.equal((await rawHttp(port, request(`/recordings/${id}/timeline.jsonl`, auth('r4a'), 'HEAD'), 1000)).status, 404);
    await stillServing();
  });

  it('item 4: an HLS segment deleted at the moment the relay checks and opens it: answered whole, no crash', async () => {
    const host = await t.join({ token: t.token({ roomId: 'r4b', participantId: 'host', grant: { canHls: true } }) });
    const status = await host.hls.start({ segmentSeconds: 0.5 });
    await host.hls.stop();
    const url = status.info!.playlist!.replace('index.m3u8', 'sub0.vtt');
    const file = join(dir, 'hls', url.split('/')[2]!, 'sub0.vtt');
    const content = fs.readFileSync(file);
    // delete it right after a check (stat) or an open of that very file, whichever the relay does
    const { statSync } = fs;
    const { open } = fs.promises;
    const patchable = fs as unknown as { statSync: typeof statSync };
    patchable.statSync = ((p: fs.PathLike, ...rest: unknown[]) => {
      const st = (statSync as (...a: unknown[]) => fs.Stats)(p, ...rest);
      if (String(p) === file) rmSync(file, { force: true });
      return st;
    }) as typeof fs.statSync;
    fs.promises.open = (async (p: fs.PathLike, ...rest: unknown[]) => {
      const handle = await (open as (...a: unknown[]) => Promise<fs.promises.FileHandle>)(p, ...rest);
      if (String(p) === file) rmSync(file, { force: true });
      return handle;
    }) as typeof fs.promises.open;
    syncBuiltinESMExports();
    try {
      const res = await rawHttp(port, request(url));
      assert.ok(res.status === 200 || res.status === 404, `answered (${res.status})`);
      if (res.status === 200) assert.deepEqual(res.body, content, 'the bytes the file had when opened');
    } finally {
      patchable.statSync = statSync;
      fs.promises.open = open;
      syncBuiltinESMExports();
    }
    assert.equal((await rawHttp(port, request(url))).status, 404, 'gone now');
    await host.leave();
    await stillServing();
  });

  /** A client that reads one chunk, then stops reading until `resume()`. */
  function slowDownload(target: string, headers: Record<string, string>) {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let first: () => void;
    const started = new Promise<void>((r) => (first = r));
    const closed = new Promise<Buffer>((resolve) => {
      socket.on('close', () => resolve(Buffer.concat(chunks)));
      socket.on('error', () => undefined);
    });
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      if (chunks.length === 1) {
        socket.pause();
        first();
      }
    });
    socket.write(request(target, headers));
    return { started, closed, resume: () => socket.resume() };
  }

  const SIZE = 48 * 1024 * 1024;
  const bodyOf = (raw: Buffer) => ({ length: Number(/content-length: (\d+)/i.exec(raw.subarray(0, 1000).toString('latin1'))?.[1]), body: raw.subarray(raw.indexOf('\r\n\r\n') + 4) });

  it('item 4: a file deleted during a slow download: the relay survives, the download completes, other rooms keep working', async () => {
    const { id, path } = await recording('r4c');
    const big = join(path, 'big--camera.webm');
    writeFileSync(big, Buffer.alloc(SIZE, 7));
    const client = slowDownload(`/recordings/${id}/big--camera.webm`, auth('r4c'));
    await client.started;
    unlinkSync(big);
    await stillServing();
    client.resume();
    const { length, body } = bodyOf(await client.closed);
    assert.equal(length, SIZE);
    assert.equal(body.length, SIZE, 'sent whole from the open file');
    await stillServing();
  });

  it('item 4: a file truncated during a slow download: the response is cut, the relay survives', async () => {
    const { id, path } = await recording('r4d');
    const big = join(path, 'big--camera.webm');
    writeFileSync(big, Buffer.alloc(SIZE, 7));
    const client = slowDownload(`/recordings/${id}/big--camera.webm`, auth('r4d'));
    await client.started;
    truncateSync(big, 1024);
    await stillServing();
    client.resume();
    const { length, body } = bodyOf(await client.closed);
    assert.equal(length, SIZE);
    assert.ok(body.length < SIZE, 'cut short, so the client knows');
    await stillServing();
  });

  it('item 4: HLS restarted again and again while clients download: every answer is 200 or 404, the relay lives', async () => {
    const host = await t.join({ token: t.token({ roomId: 'r4e', participantId: 'host', grant: { canHls: true } }) });
    let playlist = (await host.hls.start({ segmentSeconds: 0.5 })).info!.playlist!;
    let stop = false;
    const statuses = new Set<number | null>();
    const readers = Array.from({ length: 4 }, async () => {
      while (!stop) {
        statuses.add((await rawHttp(port, request(playlist))).status);
        statuses.add((await rawHttp(port, request(playlist.replace('index.m3u8', 'seg0.ts')))).status);
      }
    });
    for (let i = 0; i < 10; i++) {
      await new Promise((r) => setTimeout(r, 60));
      await host.hls.stop();
      playlist = (await host.hls.start({ segmentSeconds: 0.5 })).info!.playlist!;
    }
    stop = true;
    await Promise.all(readers);
    await host.hls.stop();
    assert.deepEqual([...statuses].filter((s) => s !== 200 && s !== 404), []);
    await host.leave();
    await stillServing();
  });

  it('item 4: a link or a FIFO in place of a recording file is not served (and does not hang the relay)', async () => {
    const { id, path } = await recording('r4f');
    writeFileSync(join(dir, 'secret.txt'), 'not yours');
    fs.symlinkSync(join(dir, 'secret.txt'), join(path, 'link--camera.webm'));
    execFileSync('mkfifo', [join(path, 'fifo--camera.webm')]);
    for (const name of ['link--camera.webm', 'fifo--camera.webm']) {
      const res = await rawHttp(port, request(`/recordings/${id}/${name}`, auth('r4f')));
      assert.equal(res.status, 404, name);
    }
    const list = JSON.parse((await rawHttp(port, request('/recordings', auth('r4f')))).body.toString()) as { recordings: Array<{ file: string }> };
    assert.deepEqual(list.recordings.map((r) => r.file), ['composite.mp4', 'timeline.jsonl']);
    await stillServing();
  });

  it('/metrics and /healthz: the token rules', async () => {
    const health = JSON.parse((await rawHttp(port, request('/healthz'))).body.toString()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(health).sort(), ['connections', 'ok', 'rooms'], '/healthz reveals only ok and counts');
    assert.equal((await rawHttp(port, request('/metrics'))).status, 200, 'no --metrics-token, loopback listener: open');
    const guarded = await startTestRelay({ metricsToken: 'metrics-secret-123' });
    const open = await startTestRelay({ host: '0.0.0.0' });
    try {
      const p = guarded.relay.port;
      assert.equal((await rawHttp(p, request('/metrics'))).status, 401);
      assert.equal((await rawHttp(p, request('/metrics', { Authorization: 'Bearer metrics-secret-12' }))).status, 401);
      assert.equal((await rawHttp(p, request('/metrics', { Authorization: 'Bearer metrics-secret-1234' }))).status, 401);
      assert.equal((await rawHttp(p, request('/metrics', { Authorization: `Bearer ${t.token({ roomId: 'x', grant: {} })}` }))).status, 401, 'a room token is not the metrics token');
      const ok = await rawHttp(p, request('/metrics', { Authorization: 'Bearer metrics-secret-123' }));
      assert.equal(ok.status, 200);
      assert.match(ok.body.toString(), /^# TYPE tessera_connections gauge$/m);
      assert.match(ok.body.toString(), /^tessera_budget_limit\{budget="history"\} \d+$/m, 'the budgets, used and limit');
      for (const line of ok.body.toString().split('\n').filter((l) => l && !l.startsWith('#'))) {
        assert.match(line, /^tessera_[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?\d+(\.\d+)?(e[+-]?\d+)?$/, `every sample is a number (Prometheus refuses the whole page otherwise): ${line}`);
      }
      assert.equal((await rawHttp(p, request('/healthz'))).status, 200, '/healthz stays public');
      const refused = await rawHttp(open.relay.port, request('/metrics'));
      assert.equal(refused.status, 403, 'listening beyond loopback without a token: off');
      assert.match(refused.body.toString(), /--metrics-token/);
      assert.equal((await rawHttp(open.relay.port, request('/healthz'))).status, 200);
    } finally {
      await guarded.close();
      await open.close();
    }
  });

  it("every refusal of the HTTP side has the server API's body, { error: { code, kind, message, reason } } (it was a string, with the code in its text)", async () => {
    const shape = (body: Buffer) => {
      const parsed = JSON.parse(body.toString()) as { error: { code: string; kind: string; message: string; reason?: string } };
      const { code, kind, message, reason } = parsed.error;
      assert.equal(typeof message, 'string');
      assert.ok(message.length > 0);
      assert.deepEqual(Object.keys(parsed), ['error']);
      return [code, kind, reason];
    };
    const { id } = await recording('shaped');
    const viewer = t.token({ roomId: 'shaped', grant: {} });
    const asker = t.token({ roomId: 'shaped', grant: { canRecord: true }, joinPolicy: { mode: 'ask' } });
    const cases: Array<[string, Record<string, string>, number, unknown[], string]> = [
      ['//', {}, 400, ['INVALID_ARGUMENT', 'Request', 'bad-url'], 'an empty segment'],
      ['/recordings/%zz/x', {}, 400, ['INVALID_ARGUMENT', 'Request', 'bad-url'], 'a bad escape'],
      [`/${'a'.repeat(3000)}`, {}, 414, ['INVALID_ARGUMENT', 'Request', 'bad-url'], 'too long'],
      ['/recordings', {}, 401, ['INVALID_TOKEN', 'Auth', 'missing'], 'no token'],
      ['/recordings', { Authorization: 'Bearer a.b.c' }, 401, ['INVALID_TOKEN', 'Auth', 'malformed'], 'a bad token'],
      ['/recordings', { Authorization: `Bearer ${viewer}` }, 403, ['INVALID_PERMISSIONS', 'Auth', 'missing-canRecord'], 'no canRecord'],
      ['/recordings', { Authorization: `Bearer ${asker}` }, 403, ['INVALID_PERMISSIONS', 'Auth', undefined], 'a token that asks'],
      ['/recordings', { Authorization: `Bearer ${t.token({ grant: {} })}` }, 403, ['INVALID_PERMISSIONS', 'Auth', undefined], 'a domain-wide token'],
      [`/recordings/${id}/nothing.webm`, auth('shaped'), 404, ['NOT_FOUND', 'Request', undefined], 'no such file'],
      ['/hls/x/y', {}, 404, ['NOT_FOUND', 'Request', undefined], 'no such run'],
    ];
    for (const [path, headers, status, expected, what] of cases) {
      const res = await rawHttp(port, request(path, headers));
      assert.equal(res.status, status, what);
      assert.deepEqual(shape(res.body), expected, what);
    }
    const post = await rawHttp(port, request('/recordings', {}, 'DELETE'));
    assert.equal(post.status, 405);
    assert.deepEqual(shape(post.body), ['INVALID_ARGUMENT', 'Request', 'method-not-allowed']);
    const open = await startTestRelay({ host: '0.0.0.0' });
    try {
      const refused = await rawHttp(open.relay.port, request('/metrics'));
      assert.deepEqual(shape(refused.body), ['INVALID_PERMISSIONS', 'Auth', undefined]);
    } finally {
      await open.close();
    }
  });
});

/**
 * Issue 11, what the second HTTP review found: pipelined requests to file routes left
 * unanswered, sockets that never read held for ever, downloads that a slow crowd could take
 * all of, handshakes that are not ones evicting joiners, and a relay out of descriptors saying
 * a file is not there.
 */
import assert from 'node:assert/strict';
import fs, { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { encodeId } from '../relay/outputs/storage.ts';
import { downloadPool } from '../relay/send-file.ts';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawHttp, request } from './fuzz/http.ts';

const RUN = 'a'.repeat(32);

/** Where a link points, or '' (a descriptor closed meanwhile). */
function readlinkOr(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '';
  }
}
const MiB = 1024 * 1024;

/** A socket that writes `bytes` and does not read until `drain()`; resolves with it once connected. */
function nonReader(port: number, bytes: string): Promise<Socket> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' }, () => {
      socket.pause();
      socket.write(bytes);
      resolve(socket);
    });
    socket.on('error', () => undefined);
  });
}

/**
 * Read what a paused socket was sent, to its end: the bytes, or null if it did not end within
 * `ms` (a socket the relay closed ends as soon as its buffered bytes are read).
 */
function drain(socket: Socket, ms: number): Promise<Buffer | null> {
  return new Promise((resolve) => {
    // reset by the relay while it still had requests to send (what it had sent is lost)
    if (socket.destroyed) return resolve(Buffer.alloc(0));
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(null);
    }, ms);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
    socket.resume();
  });
}

describe('issue 11: HTTP sockets and downloads are bounded', () => {
  let t: TestRelay;
  let dir: string;
  let port: number;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tessera-http-sockets-'));
    t = await startTestRelay({ recordingsDir: join(dir, 'rec'), hlsDir: join(dir, 'hls'), httpIdleMs: 1000, maxPendingConnections: 2 });
    port = t.relay.port;
    // a run as the HLS output leaves it: a playlist and a large segment
    mkdirSync(join(dir, 'hls', RUN), { recursive: true, mode: 0o700 });
    writeFileSync(join(dir, 'hls', RUN, 'index.m3u8'), '#EXTM3U\n#EXT-X-VERSION:3\n');
    writeFileSync(join(dir, 'hls', RUN, 'seg0.ts'), Buffer.alloc(64 * MiB, 7));
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('pipelined requests to a file route are each answered, in order', async () => {
    const get = `GET /hls/${RUN}/index.m3u8 HTTP/1.1\r\nHost: relay\r\n\r\n`;
    const raw = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(get + get + get.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n')));
      const chunks: Buffer[] = [];
      socket.on('data', (c) => chunks.push(c));
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
      setTimeout(() => socket.destroy(), 5000);
    });
    assert.equal(raw.split('HTTP/1.1 200 OK').length - 1, 3, 'three answers');
  });

  it('a socket that pipelines requests and never reads their answers is closed once it makes no progress', async () => {
    // far more answers than the kernel's buffers hold: the relay's writes stop making progress
    const line = 'GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n';
    const requests = 200_000;
    const socket = await nonReader(port, line.repeat(requests));
    // Node's socket timeout can take two of its periods to fire (a write queue that changed once more)
    await new Promise((r) => setTimeout(r, 5000));
    const got = await drain(socket, 5000);
    assert.ok(got !== null, 'the relay closed it');
    const answers = got.toString('latin1').split('HTTP/1.1 ').length - 1;
    assert.ok(answers < requests, `cut before answering everything: ${answers} answers`);
  });

  it('downloads are limited per client address: the ninth at once is 503, and HLS readers do not take the recordings\' places', async () => {
    const readers = await Promise.all(Array.from({ length: 8 }, () => nonReader(port, request(`/hls/${RUN}/seg0.ts`).replace('Connection: close\r\n', ''))));
    try {
      // the eight are in their downloads (headers sent) before the ninth asks
      await new Promise((r) => setTimeout(r, 300));
      const ninth = await rawHttp(port, request(`/hls/${RUN}/index.m3u8`));
      assert.equal(ninth.status, 503);
      assert.equal(ninth.headers['retry-after'], '1');
      const { error } = JSON.parse(ninth.body.toString()) as { error: Record<string, unknown> };
      assert.deepEqual({ ...error, message: typeof error.message }, { code: 'RATE_LIMITED', kind: 'Request', reason: 'downloads-full', message: 'string' });
      // a recording of the room, by its own member: another pool
      const host = await t.join({ token: t.token({ roomId: 'rec-pool', participantId: 'host', grant: { canRecord: true } }) });
      const status = await host.recording.start();
      await host.recording.stop();
      await host.leave();
      const id = status.info!.recording!;
      writeFileSync(join(dir, 'rec', encodeId('default'), encodeId('rec-pool'), id, 'x--camera.webm'), 'bytes');
      const auth = { Authorization: `Bearer ${t.token({ roomId: 'rec-pool', grant: { canRecord: true } })}` };
      assert.equal((await rawHttp(port, request(`/recordings/${id}/x--camera.webm`, auth))).status, 200);
    } finally {
      for (const r of readers) r.destroy();
    }
    await until(async () => (await rawHttp(port, request(`/hls/${RUN}/index.m3u8`))).status === 200, 3000, 'the places given back');
  });

  it('downloads pipelined behind another give back their places and files when their socket closes before their turn (Node never closes such a response)', async () => {
    const pool = downloadPool(t.relay.context, 'hls');
    await until(() => pool.inUse === 0, 3000, 'the earlier tests\' places given back');
    const get = request(`/hls/${RUN}/seg0.ts`).replace('Connection: close\r\n', '');
    const openFiles = () => readdirSync('/proc/self/fd').filter((fd) => readlinkOr(`/proc/self/fd/${fd}`).endsWith('seg0.ts')).length;
    // before the fix, each round kept the second download's place and file until the relay
    // stopped: seven rounds, and the address had no place left
    for (let round = 0; round < 10; round++) {
      const socket = await nonReader(port, get + get);
      await until(() => pool.inUse === 2, 3000, 'both downloads began (the second queued behind the first)');
      socket.destroy();
      await until(() => pool.inUse === 0, 3000, `round ${round}: both places given back`);
    }
    await until(() => openFiles() === 0, 3000, 'every file closed');
  });

  it('a download whose reader stops is cut when it makes no progress for twice the idle time', async () => {
    const socket = await nonReader(port, request(`/hls/${RUN}/seg0.ts`));
    await new Promise((r) => setTimeout(r, 7000));
    const got = await drain(socket, 5000);
    assert.ok(got !== null, 'the relay closed it');
    assert.ok(got.length < 64 * MiB, `cut, not sent whole: ${got.length} bytes`);
  });

  it('a download that keeps trickling below the minimum rate is cut as it goes, long before its size would let it last; one room\'s recordings take at most a quarter of their pool', async () => {
    const slow = await startTestRelay({ recordingsDir: join(dir, 'rec2'), hlsDir: join(dir, 'hls2'), httpIdleMs: 1000, downloadMinRate: 8 * MiB, downloadsPerAddress: 0 });
    const readers: Socket[] = [];
    try {
      const recording = async (room: string) => {
        const host = await slow.join({ token: slow.token({ roomId: room, participantId: 'host', grant: { canRecord: true } }) });
        const id = (await host.recording.start()).info!.recording!;
        await host.recording.stop();
        await host.leave();
        writeFileSync(join(dir, 'rec2', encodeId('default'), encodeId(room), id, 'x--camera.webm'), Buffer.alloc(64 * MiB, 7));
        return { id, auth: { Authorization: `Bearer ${slow.token({ roomId: room, grant: { canRecord: true } })}` } };
      };
      const one = await recording('pace-1');
      const two = await recording('pace-2');
      const path = (r: { id: string }) => `/recordings/${r.id}/x--camera.webm`;
      // a reader that takes 256 KiB every 100 ms (2.5 MiB/s, below 8 MiB/s, but never idle): its size allows it 9 s
      const trickle = await nonReader(slow.relay.port, request(path(one), one.auth));
      readers.push(trickle);
      let got = 0;
      const tick = setInterval(() => {
        const chunk = trickle.read(256 * 1024) as Buffer | null;
        if (chunk) got += chunk.length;
      }, 100);
      await new Promise((r) => setTimeout(r, 5000));
      clearInterval(tick);
      assert.ok(got > 0, 'it was making progress');
      // then what is left, as fast as it comes: a download cut by its pace ends short of its 64 MiB
      const rest = await drain(trickle, 10_000);
      assert.ok(rest !== null, 'the relay closed it');
      assert.ok(got + rest.length < 64 * MiB, `cut within 5 s, not at its 9 s deadline: ${got + rest.length} bytes sent`);
      // sixteen downloads of one room's recordings hold its share: the seventeenth is 503, another room's is served
      for (let i = 0; i < 16; i++) readers.push(await nonReader(slow.relay.port, request(path(one), one.auth).replace('Connection: close\r\n', '')));
      await new Promise((r) => setTimeout(r, 300));
      assert.equal((await rawHttp(slow.relay.port, request(path(one), one.auth))).status, 503);
      const other = await nonReader(slow.relay.port, request(path(two), two.auth));
      readers.push(other);
      const head = await drain(other, 200).catch(() => null);
      assert.ok(head === null || head.toString('latin1', 0, 12) === 'HTTP/1.1 200', 'another room\'s recording is served');
    } finally {
      for (const r of readers) r.destroy();
      await slow.close();
    }
  });

  it('an upgrade request that is not a WebSocket handshake is refused without evicting a joiner', async () => {
    const joiners = await Promise.all(
      [0, 1].map(
        () =>
          new Promise<WebSocket>((resolve, reject) => {
            const ws = new WebSocket(t.url);
            ws.once('open', () => resolve(ws));
            ws.once('error', reject);
          }),
      ),
    );
    const closes = joiners.map((ws) => new Promise<number>((resolve) => ws.once('close', (code) => resolve(code))));
    const bogus = await rawHttp(port, 'GET / HTTP/1.1\r\nHost: relay\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    assert.equal(bogus.status, 400);
    // a version ws would read as 13 (it takes it as a number) is not switched to, then closed: refused
    for (const version of ['13.0', '0xd', '1.3e1']) {
      const odd = await rawHttp(port, `GET / HTTP/1.1\r\nHost: relay\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: ${version}\r\n\r\n`);
      assert.equal(odd.status, 400, version);
    }
    const evicted = await Promise.race([Promise.race(closes), new Promise((r) => setTimeout(() => r('none'), 500))]);
    assert.equal(evicted, 'none', 'no joiner was evicted');
    for (const ws of joiners) ws.terminate();
  });

  it('a request with a body outside the API (chunked without end, or a huge length) is refused 400 unread and its connection closed', async () => {
    const cases = [['/healthz', 'Transfer-Encoding: chunked'], ['/', 'Transfer-Encoding: chunked'], ['/', 'Content-Length: 1000000000000'], ['//', 'Content-Length: 5']] as const;
    for (const [target, framing] of cases) {
      for (const feed of [false, true]) {
        const socket = connect({ port, host: '127.0.0.1' });
        socket.on('error', () => undefined);
        await new Promise((resolve) => socket.once('connect', resolve));
        socket.write(`GET ${target} HTTP/1.1\r\nHost: relay\r\n${framing}\r\n\r\n`);
        let got = '';
        socket.on('data', (c: Buffer) => (got += c.toString('latin1')));
        const closed = new Promise<boolean>((resolve) => {
          socket.once('close', () => resolve(true));
          setTimeout(() => resolve(false), 3000);
        });
        // an endless body of one-byte chunks (or bytes), as fast as the relay takes them (the
        // relay's close then resets the connection, and the answer may be lost with it)
        const feeder = feed ? setInterval(() => {
          for (let i = 0; i < 200 && !socket.destroyed; i++) socket.write(framing.startsWith('Transfer') ? '1\r\nx\r\n' : 'x');
        }, 1) : undefined;
        const ended = await closed;
        clearInterval(feeder);
        socket.destroy();
        assert.ok(ended, `${target} ${framing}${feed ? ', fed' : ''}: the relay closed the connection`);
        if (!feed) {
          assert.match(got, /^HTTP\/1\.1 400 /, `${target} ${framing}: ${got.slice(0, 40)}`);
          assert.match(got, /connection: close/i);
        }
      }
    }
    assert.equal((await rawHttp(port, request('/healthz'))).status, 200);
  });

  it('plain HTTP sockets are at most 1,024 beside the members: past them a new one is answered 503 and closed, and members still join', async () => {
    const small = await startTestRelay({ maxConnections: 4, maxPendingConnections: 2, httpSocketsPerAddress: 0 });
    const sockets: Socket[] = [];
    try {
      const smallPort = small.relay.port;
      // the relay's whole socket cap (4 + 2 + 1,024) in kept-alive HTTP sockets, each asking /healthz
      const statuses = await Promise.all(
        Array.from({ length: 1030 }, () =>
          new Promise<number>((resolve) => {
            const socket = connect({ port: smallPort, host: '127.0.0.1' }, () => socket.write('GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n'));
            sockets.push(socket);
            socket.on('error', () => resolve(0));
            socket.once('data', (c: Buffer) => resolve(Number(/^HTTP\/1\.1 (\d+)/.exec(c.toString('latin1'))?.[1] ?? 0)));
          }),
        ),
      );
      assert.equal(statuses.filter((s) => s === 200).length, 1024);
      assert.equal(statuses.filter((s) => s === 503).length, 6);
      const room = await small.join({ token: small.token({ roomId: 'r', participantId: 'member', grant: {} }) });
      assert.equal(room.localParticipant.id, 'member');
    } finally {
      for (const socket of sockets) socket.destroy();
      await small.close();
    }
  });

  it('one client address holds at most its share of the plain HTTP sockets (--http-sockets-per-address): past it 503 and closed, while other addresses are served and its own places come back as it closes', async () => {
    const small = await startTestRelay({ httpSocketsPerAddress: 5 });
    const sockets: Socket[] = [];
    const ask = (localAddress: string) =>
      new Promise<{ status: number; body: string; closed: Promise<void> }>((resolve) => {
        const socket = connect({ port: small.relay.port, host: '127.0.0.1', localAddress }, () => socket.write('GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n'));
        sockets.push(socket);
        const closed = new Promise<void>((done) => socket.once('close', () => done()));
        socket.on('error', () => resolve({ status: 0, body: '', closed }));
        socket.once('data', (c: Buffer) => {
          const text = c.toString('latin1');
          resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1] ?? 0), body: text, closed });
        });
      });
    try {
      const first = await Promise.all(Array.from({ length: 5 }, () => ask('127.0.0.1')));
      assert.deepEqual(first.map((a) => a.status), [200, 200, 200, 200, 200]);
      const over = await ask('127.0.0.1');
      assert.equal(over.status, 503);
      const { error } = JSON.parse(over.body.slice(over.body.indexOf('\r\n\r\n') + 4)) as { error: Record<string, unknown> };
      assert.deepEqual({ ...error, message: typeof error.message }, { code: 'RATE_LIMITED', kind: 'Request', reason: 'http-sockets-per-address', message: 'string' });
      await over.closed;
      // another address has its own share
      assert.equal((await ask('127.0.0.2')).status, 200);
      // a kept-alive socket keeps its place: its next request is served
      const again = await new Promise<number>((resolve) => {
        const socket = sockets[0]!;
        socket.once('data', (c: Buffer) => resolve(Number(/^HTTP\/1\.1 (\d+)/.exec(c.toString('latin1'))?.[1] ?? 0)));
        socket.write('GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n');
      });
      assert.equal(again, 200);
      // one of the address's sockets closes: its place comes back
      sockets[1]!.destroy();
      await first[1]!.closed;
      assert.equal((await ask('127.0.0.1')).status, 200);
      assert.equal((await ask('127.0.0.1')).status, 503);
      // members join whatever the address's HTTP sockets
      const room = await small.join({ token: small.token({ roomId: 'r', participantId: 'member', grant: {} }) });
      assert.equal(room.localParticipant.id, 'member');
    } finally {
      for (const socket of sockets) socket.destroy();
      await small.close();
    }
  });

  it('a relay out of file descriptors answers 503 with retry-after, not 404', async () => {
    const { open } = fs.promises;
    fs.promises.open = (async () => {
      throw Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });
    }) as typeof fs.promises.open;
    syncBuiltinESMExports();
    try {
      const res = await rawHttp(port, request(`/hls/${RUN}/index.m3u8`));
      assert.equal(res.status, 503);
      assert.equal(res.headers['retry-after'], '1');
    } finally {
      fs.promises.open = open;
      syncBuiltinESMExports();
    }
    assert.equal((await rawHttp(port, request(`/hls/${RUN}/index.m3u8`))).status, 200);
  });
});

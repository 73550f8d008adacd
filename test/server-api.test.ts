import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { KeyStore } from '../relay/token/keys.ts';
import { ADMIN_ACTOR } from '../src/protocol/server-api.ts';
import { signJwt } from '../src/server/jwt.ts';
import { RoomService } from '../src/server/room-service.ts';
import { rawHttp } from './fuzz/http.ts';
import { API_KEY, nextEvent, rejectsWith, SECRET, startTestRelay, until, type TestRelay } from './helpers.ts';

const OTHER_KEY = 'other-key';
const OTHER_SECRET = 'other-secret-0123456789abcdef';

/** A server-API token with these claims (by default: admin, one minute). */
function adminToken(claims: Record<string, unknown> = {}, secret = SECRET): string {
  const now = Math.floor(Date.now() / 1000);
  return signJwt({ iss: API_KEY, admin: true, iat: now, exp: now + 60, ...claims }, secret);
}

/** A raw HTTP request to the relay, answered with its status, headers and parsed body. */
function call(port: number, method: string, path: string, options: { token?: string; body?: string; headers?: Record<string, string> } = {}): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: { error?: { code: string; kind: string; reason?: string; message: string } } & Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers: { ...(options.token ? { authorization: `Bearer ${options.token}` } : {}), ...options.headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(Buffer.concat(chunks).toString() || '{}') }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

describe('server API (issue 15)', () => {
  let t: TestRelay;
  let service: RoomService;
  let other: RoomService;
  before(async () => {
    const keys = new KeyStore();
    keys.replaceProjects({ acme: { keys: { [API_KEY]: SECRET }, revoked: [] }, globex: { keys: { [OTHER_KEY]: OTHER_SECRET }, revoked: [] } });
    t = await startTestRelay({ keys, apiRate: 1000 });
    service = new RoomService({ url: t.url, apiKey: API_KEY, secret: SECRET });
    other = new RoomService({ url: t.url, apiKey: OTHER_KEY, secret: OTHER_SECRET });
  });
  after(() => t.close());

  it('listRooms pages the project rooms in id order; getRoom tells counts and outputs', async () => {
    const rooms = await Promise.all(['r-b', 'r-a', 'r-c'].map((roomId) => t.join({ token: t.token({ roomId, grant: {} }) })));
    const first = await service.listRooms({ limit: 2 });
    assert.deepEqual(first.rooms.map((r) => r.roomId), ['r-a', 'r-b']);
    assert.ok(first.nextCursor);
    const second = await service.listRooms({ limit: 2, cursor: first.nextCursor });
    assert.deepEqual(second.rooms.map((r) => r.roomId), ['r-c']);
    assert.equal(second.nextCursor, null);
    const one = await service.getRoom('r-a');
    assert.deepEqual(one.counts, { speaker: 1, viewer: 0, total: 1 });
    assert.equal(one.outputs.recording.state, 'stopped');
    await Promise.all(rooms.map((r) => r.leave()));
  });

  it('a relay served under a path by a proxy (wss://host/tessera) is reached under that path; dot segments are refused', async () => {
    const { createServer } = await import('node:http');
    const seen: string[] = [];
    // a proxy that serves the relay at /tessera/ (and nothing else)
    const proxy = createServer((req, res) => {
      seen.push(req.url ?? '');
      if (!req.url?.startsWith('/tessera/')) return void res.writeHead(404).end();
      const upstream = httpRequest({ host: '127.0.0.1', port: Number(new URL(t.url).port), method: req.method, path: req.url.slice('/tessera'.length), headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const { port } = proxy.address() as { port: number };
    try {
      const room = await t.join({ token: t.token({ roomId: 'proxied', grant: {} }) });
      const behind = new RoomService({ url: `ws://127.0.0.1:${port}/tessera/`, apiKey: API_KEY, secret: SECRET });
      assert.equal((await behind.getRoom('proxied')).counts.total, 1);
      assert.ok(seen.every((u) => u.startsWith('/tessera/api/v1/')), seen.join(' '));
      await room.leave();
      for (const url of [`ws://127.0.0.1:${port}/tessera/../x`, `ws://127.0.0.1:${port}/./x`, `ws://127.0.0.1:${port}/a?b`]) {
        assert.throws(() => new RoomService({ url, apiKey: API_KEY, secret: SECRET }), (err: { reason?: string }) => err.reason === 'bad-url', url);
      }
    } finally {
      proxy.close();
    }
  });

  it('listParticipants walks both tiers with the SDK cursors', async () => {
    const host = await t.join({ token: t.token({ roomId: 'walk', participantId: 'host', grant: {} }) });
    const viewers = [];
    for (let i = 0; i < 7; i++) viewers.push(await t.join({ token: t.token({ roomId: 'walk', participantId: `v${i}`, grant: {}, isViewer: true }) }));
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await service.listParticipants('walk', { tier: 'viewer', limit: 3, cursor });
      seen.push(...page.participants.map((p) => p.id));
      cursor = page.nextCursor;
    } while (cursor);
    assert.deepEqual(seen, ['v0', 'v1', 'v2', 'v3', 'v4', 'v5', 'v6']);
    const sdkPage = await host.getParticipants({ tier: 'viewer', limit: 3 });
    const apiPage = await service.listParticipants('walk', { tier: 'viewer', cursor: sdkPage.nextCursor, limit: 3 });
    assert.deepEqual(apiPage.participants.map((p) => p.id), ['v3', 'v4', 'v5'], 'a cursor of the SDK continues the same walk');
    assert.deepEqual((await service.listParticipants('walk')).participants.map((p) => [p.id, p.tier]), [['host', 'speaker']]);
    const err = await rejectsWith(service.listParticipants('walk', { tier: 'speaker', cursor: sdkPage.nextCursor }), 'INVALID_ARGUMENT');
    assert.equal(err.reason, 'bad-cursor');
    await rejectsWith(service.listParticipants('walk', { limit: 1001 }), 'INVALID_ARGUMENT');
    await Promise.all([host, ...viewers].map((r) => r.leave()));
  });

  it('removeParticipant removes a speaker and a viewer by id; their tokens stay out', async () => {
    const host = await t.join({ token: t.token({ roomId: 'rm', participantId: 'host', grant: {} }) });
    const guestToken = t.token({ roomId: 'rm', participantId: 'guest', grant: {} });
    const guest = await t.join({ token: guestToken });
    const viewerToken = t.token({ roomId: 'rm', grant: {}, isViewer: true });
    const viewer = await t.join({ token: viewerToken });
    const guestGone = nextEvent(guest, 'disconnected');
    const viewerGone = nextEvent(viewer, 'disconnected');
    await service.removeParticipant('rm', 'guest');
    await service.removeParticipant('rm', viewer.localParticipant.id);
    assert.deepEqual(await guestGone, { reason: 'removed' });
    assert.deepEqual(await viewerGone, { reason: 'removed' }, 'a viewer is removed by id');
    assert.equal((await rejectsWith(t.join({ token: guestToken }), 'UNAUTHORIZED_PARTICIPANT')).reason, 'removed');
    assert.equal((await rejectsWith(t.join({ token: viewerToken, roomId: 'rm' }), 'UNAUTHORIZED_PARTICIPANT')).reason, 'removed');
    assert.equal((await rejectsWith(service.removeParticipant('rm', 'nobody'), 'NOT_FOUND')).reason, 'unknown-participant');
    await until(() => !host.remoteParticipants.has('guest'));
    await host.leave();
  });

  it('endRoom ends every session; a room that is not open is NOT_FOUND', async () => {
    const a = await t.join({ token: t.token({ roomId: 'end', grant: {} }) });
    const b = await t.join({ token: t.token({ roomId: 'end', grant: {}, isViewer: true }) });
    const ends = [a, b].map((r) => nextEvent(r, 'disconnected'));
    await service.endRoom('end');
    for (const e of await Promise.all(ends)) assert.deepEqual(e, { reason: 'room-ended' });
    assert.equal((await rejectsWith(service.endRoom('end'), 'NOT_FOUND')).reason, 'unknown-room');
    assert.equal((await rejectsWith(service.getRoom('never'), 'NOT_FOUND')).reason, 'unknown-room');
  });

  it('startOutput / stopOutput run the same output board; by is the server API', async () => {
    const member = await t.join({ token: t.token({ roomId: 'out', grant: {} }) });
    const changes: string[] = [];
    member.on('output-changed', ({ output, state, by }) => changes.push(`${output}:${state}:${by}`));
    const started = await service.startOutput('out', 'whiteboard');
    assert.equal(started.state, 'active');
    assert.equal((await rejectsWith(service.startOutput('out', 'whiteboard'), 'INVALID_STATE')).reason, 'output-already-active');
    assert.equal((await service.stopOutput('out', 'whiteboard')).state, 'stopped');
    await until(() => changes.length === 4);
    assert.deepEqual(changes, ['whiteboard:starting', 'whiteboard:active', 'whiteboard:stopping', 'whiteboard:stopped'].map((c) => `${c}:${ADMIN_ACTOR}`));
    assert.equal((await rejectsWith(service.startOutput('out', 'livestream', { url: 'http://nope' }), 'INVALID_ARGUMENT')).reason, 'bad-url');
    assert.equal((await rejectsWith(service.startOutput('out', 'hls', { segmentSeconds: 'long' } as never), 'INVALID_ARGUMENT')).reason, 'bad-body');
    assert.equal((await rejectsWith(service.startOutput('out', 'nothing' as 'recording'), 'NOT_FOUND')).reason, 'unknown-route');
    await member.leave();
  });

  it('publishData goes through the topic board: delivered, targeted, persisted, limited', async () => {
    const alice = await t.join({ token: t.token({ roomId: 'data', participantId: 'alice', grant: {} }) });
    const bob = await t.join({ token: t.token({ roomId: 'data', participantId: 'bob', grant: {}, isViewer: true }) });
    const got = { alice: [] as unknown[], bob: [] as unknown[] };
    await alice.pubsub.subscribe('news', (m) => got.alice.push([m.from, m.payload]));
    await bob.pubsub.subscribe('news', (m) => got.bob.push([m.from, m.payload]));
    const all = await service.publishData('data', 'news', { text: 'hello' }, { persist: true });
    assert.equal(all.recipients, 2);
    const one = await service.publishData('data', 'news', 'only bob', { to: ['bob'] });
    assert.equal(one.recipients, 1);
    await until(() => got.bob.length === 2 && got.alice.length === 1);
    assert.deepEqual(got.alice, [[ADMIN_ACTOR, { text: 'hello' }]]);
    assert.deepEqual(got.bob, [[ADMIN_ACTOR, { text: 'hello' }], [ADMIN_ACTOR, 'only bob']]);
    assert.deepEqual((await alice.pubsub.getHistory('news')).map((m) => m.payload), [{ text: 'hello' }]);
    const big = await rejectsWith(service.publishData('data', 'news', 'x'.repeat(70 * 1024)), 'PAYLOAD_TOO_LARGE');
    assert.equal(big.reason, 'payload-too-large');
    let deep: unknown = 1;
    for (let i = 0; i < 70; i++) deep = [deep];
    await rejectsWith(service.publishData('data', 'news', deep as number), 'INVALID_ARGUMENT');
    await Promise.all([alice.leave(), bob.leave()]);
  });

  it('every call stays in its project: another project sees nothing and touches nothing', async () => {
    const member = await t.join({ token: t.token({ roomId: 'secret-room', participantId: 'm', grant: {} }) });
    assert.deepEqual((await other.listRooms()).rooms, []);
    for (const attempt of [other.getRoom('secret-room'), other.listParticipants('secret-room'), other.removeParticipant('secret-room', 'm'), other.endRoom('secret-room'), other.publishData('secret-room', 't', 1), other.startOutput('secret-room', 'whiteboard')]) {
      assert.equal((await rejectsWith(attempt, 'NOT_FOUND')).reason, 'unknown-room');
    }
    assert.deepEqual((await service.getRoom('secret-room')).counts.total, 1);
    await member.leave();
  });

  it('tokens: expired, participant, too long-lived, wrong secret, revoked key, none: refused; an admin token cannot join', async () => {
    const { port } = t.relay;
    const now = Math.floor(Date.now() / 1000);
    const expect = async (token: string | undefined, status: number, code: string, reason: string) => {
      const res = await call(port, 'GET', '/api/v1/rooms', token === undefined ? {} : { token });
      assert.equal(res.status, status, reason);
      assert.equal(res.body.error?.code, code, reason);
      assert.equal(res.body.error?.reason, reason);
    };
    await expect(adminToken({ exp: now - 120 }), 401, 'INVALID_TOKEN', 'expired');
    await expect(t.token({ roomId: 'x', grant: { canModerate: true } }), 403, 'INVALID_PERMISSIONS', 'admin-required');
    await expect(adminToken({ admin: false }), 403, 'INVALID_PERMISSIONS', 'admin-required');
    await expect(adminToken({ exp: now + 3600 }), 401, 'INVALID_TOKEN', 'lifetime-too-long');
    await expect(adminToken({}, 'not-the-secret-0123456789'), 401, 'INVALID_TOKEN', 'bad-signature');
    await expect(adminToken({ iss: 'who' }), 401, 'INVALID_API_KEY', 'unknown-api-key');
    await expect(undefined, 401, 'INVALID_TOKEN', 'missing');
    await expect(`${adminToken().slice(0, -2)}xx`, 401, 'INVALID_TOKEN', 'bad-signature');
    const joined = await rejectsWith(t.join({ token: adminToken({ roomId: 'x', grant: {} }), roomId: 'x' }), 'INVALID_TOKEN');
    assert.equal(joined.reason, 'admin-token');
    const wrong = new RoomService({ url: t.url, apiKey: API_KEY, secret: 'wrong-secret-0123456789abc' });
    assert.equal((await rejectsWith(wrong.listRooms(), 'INVALID_TOKEN')).reason, 'bad-signature');
    t.keys.replaceProjects({ acme: { keys: { [API_KEY]: SECRET }, revoked: [API_KEY] }, globex: { keys: { [OTHER_KEY]: OTHER_SECRET }, revoked: [] } });
    try {
      assert.equal((await rejectsWith(service.listRooms(), 'INVALID_API_KEY')).reason, 'revoked-api-key');
    } finally {
      t.keys.replaceProjects({ acme: { keys: { [API_KEY]: SECRET }, revoked: [] }, globex: { keys: { [OTHER_KEY]: OTHER_SECRET }, revoked: [] } });
    }
  });

  it('absurd requests are answered: wrong route, method, content type, GET with a body, huge, deep or broken JSON', async () => {
    const { port } = t.relay;
    const token = adminToken();
    const room = await t.join({ token: t.token({ roomId: 'absurd', grant: {} }) });
    const json = { 'content-type': 'application/json' };
    const cases: Array<[string, string, Parameters<typeof call>[3], number, string]> = [
      ['GET', '/api/v1/nothing', { token }, 404, 'unknown-route'],
      ['GET', '/api/v2/rooms', { token }, 404, 'unknown-route'],
      ['PUT', '/api/v1/rooms', { token }, 405, 'method-not-allowed'],
      ['POST', '/api/v1/rooms/absurd/data', { token, body: '{"topic":"t","payload":1}', headers: { 'content-type': 'text/plain' } }, 415, 'bad-content-type'],
      ['GET', '/api/v1/rooms', { token, body: '{}', headers: { ...json, 'content-length': '2' } }, 400, 'bad-body'],
      ['POST', '/api/v1/rooms/absurd/data', { token, body: '{"topic":', headers: json }, 400, 'bad-body'],
      ['POST', '/api/v1/rooms/absurd/data', { token, body: '[1]', headers: json }, 400, 'bad-body'],
      ['POST', '/api/v1/rooms/absurd/data', { token, body: `{"topic":"t","payload":${'['.repeat(5000)}${']'.repeat(5000)}}`, headers: json }, 400, 'bad-body'],
      ['POST', '/api/v1/rooms/absurd/data', { token, body: 'x'.repeat(300 * 1024), headers: json }, 413, 'body-too-large'],
      ['GET', '/api/v1/rooms?limit=0', { token }, 400, 'bad-query'],
      ['GET', '/api/v1/rooms?cursor=%%%', { token }, 400, 'bad-cursor'],
    ];
    for (const [method, path, options, status, reason] of cases) {
      const res = await call(port, method, path, options);
      assert.equal(res.status, status, `${method} ${path}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error?.reason, reason, `${method} ${path}`);
    }
    assert.equal((await call(port, 'PUT', '/api/v1/rooms', { token })).headers.allow, 'GET, HEAD');
    // refused by content-length before a byte of the body is read
    const early = await rawHttp(port, `POST /api/v1/rooms/absurd/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 999999999\r\n\r\n{`);
    assert.equal(early.status, 413);
    // a chunked body over the limit is cut while it arrives
    const chunk = 'x'.repeat(64 * 1024);
    const chunked = await rawHttp(port, `POST /api/v1/rooms/absurd/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${`${(chunk.length).toString(16)}\r\n${chunk}\r\n`.repeat(6)}0\r\n\r\n`);
    assert.equal(chunked.status, 413);
    // repeated Authorization headers are one header Node joins: not a token
    const twice = await rawHttp(port, `GET /api/v1/rooms HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`);
    assert.ok(twice.status === 401 || twice.status === 200, String(twice.status));
    assert.equal((await call(port, 'GET', '/healthz')).status, 200);
    await room.leave();
  });

  it('a body that trickles is cut with 408 and the relay keeps answering', async () => {
    const { port } = t.relay;
    const res = await rawHttp(port, `POST /api/v1/rooms/absurd/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${adminToken()}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"to`, 12_000);
    assert.equal(res.status, 408);
    assert.equal((await call(port, 'GET', '/healthz')).status, 200);
  });

  it('each API key has a request rate', async () => {
    const slow = await startTestRelay({ apiRate: 2 });
    try {
      const s = new RoomService({ url: slow.url, apiKey: API_KEY, secret: SECRET });
      const results = await Promise.allSettled(Array.from({ length: 8 }, () => s.listRooms()));
      const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as { code: string; reason: string });
      assert.ok(refused.length >= 3, `${refused.length} refused`);
      assert.ok(refused.every((e) => e.code === 'RATE_LIMITED' && e.reason === 'api-rate'));
    } finally {
      await slow.close();
    }
  });
});

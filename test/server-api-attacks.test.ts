/**
 * The server API, its tokens and RoomService as a hostile integrator or an outsider would try
 * them. Each case is an attack: either a finding (fixed, so the test pins the fix) or one that
 * held (pinned, so it keeps holding).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request as httpRequest } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { KeyStore } from '../relay/token/keys.ts';
import { createRecordingDir, newRecordingId, recordingWritten } from '../relay/outputs/storage.ts';
import { ADMIN_ACTOR } from '../src/protocol/server-api.ts';
import { signJwt } from '../src/server/jwt.ts';
import { RoomService } from '../src/server/room-service.ts';
import { API_KEY, rejectsWith, SECRET, startTestRelay, until, type TestRelay } from './helpers.ts';

const OTHER_KEY = 'other-key';
const OTHER_SECRET = 'other-secret-0123456789abcdef';
const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

function adminToken(claims: Record<string, unknown> = {}, secret = SECRET): string {
  const now = Math.floor(Date.now() / 1000);
  return signJwt({ iss: API_KEY, admin: true, iat: now, exp: now + 60, ...claims }, secret);
}

type Answer = { status: number; headers: Record<string, string | string[] | undefined>; text: string; body: { error?: { code: string; kind: string; reason?: string; message: string } } & Record<string, unknown> };

function call(port: number, method: string, path: string, options: { token?: string; body?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers = { ...(options.token ? { authorization: `Bearer ${options.token}` } : {}), ...(options.body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers };
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let body = {};
        try {
          body = JSON.parse(text || '{}');
        } catch {
          // not every refusal of the HTTP layer is the API's JSON
        }
        resolve({ status: res.statusCode!, headers: res.headers, text, body });
      });
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

describe('server API: attacks', () => {
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

  it('a participant cannot join as the server API to speak in its name (pinned or not)', async () => {
    const unpinned = await rejectsWith(t.join({ token: t.token({ roomId: 'imp', grant: { canPublishData: true } }), participantId: ADMIN_ACTOR }), 'UNAUTHORIZED_PARTICIPANT');
    assert.equal(unpinned.reason, 'identity-reserved');
    const pinned = await rejectsWith(t.join({ token: t.token({ roomId: 'imp', participantId: ADMIN_ACTOR, grant: { canPublishData: true } }) }), 'UNAUTHORIZED_PARTICIPANT');
    assert.equal(pinned.reason, 'identity-reserved');
    // nor under what looks like it: another case (a roster may show ids in capitals), or an invisible character (an attack review)
    for (const id of ['Server-API', 'server\u2011api', 'server\u2212api', '\uff53\uff45\uff52\uff56\uff45\uff52-api']) {
      const lookalike = await rejectsWith(t.join({ token: t.token({ roomId: 'imp', grant: { canPublishData: true } }), participantId: id }), 'UNAUTHORIZED_PARTICIPANT');
      assert.equal(lookalike.reason, 'identity-reserved', JSON.stringify(id));
    }
    for (const id of [`${ADMIN_ACTOR}\u00ad`, `${ADMIN_ACTOR}\u2060`, `${ADMIN_ACTOR} `]) await rejectsWith(t.join({ token: t.token({ roomId: 'imp', grant: { canPublishData: true } }), participantId: id }), 'INVALID_ARGUMENT');
    assert.equal(t.relay.context.rooms.get('acme', 'imp'), undefined, 'no room was opened');
  });

  it('RoomService reaches ids that are dot segments (".", ".."): a participant cannot make itself unremovable', async () => {
    const host = await t.join({ token: t.token({ roomId: 'dots', participantId: 'host', grant: {} }) });
    const dot = await t.join({ token: t.token({ roomId: 'dots', grant: {} }), participantId: '.' });
    const dotdot = await t.join({ token: t.token({ roomId: 'dots', grant: {} }), participantId: '..' });
    const inDot = await t.join({ token: t.token({ roomId: '.', grant: {} }), participantId: 'p' });
    const page = await service.listParticipants('dots');
    assert.deepEqual(page.participants.map((p) => p.id), ['host', '.', '..']);
    assert.deepEqual((await service.listParticipants('.')).participants.map((p) => p.id), ['p'], 'the room ".", not the room "participants"');
    assert.equal((await service.getRoom('.')).roomId, '.');
    assert.equal((await rejectsWith(service.getRoom('..'), 'NOT_FOUND')).reason, 'unknown-room');
    await service.removeParticipant('dots', '..');
    await service.removeParticipant('dots', '.');
    await until(async () => (await service.listParticipants('dots')).participants.length === 1);
    assert.deepEqual((await service.listParticipants('dots')).participants.map((p) => p.id), ['host']);
    await service.endRoom('.');
    await until(() => t.relay.context.rooms.get('acme', '.') === undefined);
    await Promise.allSettled([host, dot, dotdot, inDot].map((r) => r.leave()));
  });

  it('listRooms pays its page from the key’s byte budget like every other page', async () => {
    const tight = await startTestRelay({ apiRate: 1000, dataByteRate: 1024, dataByteBurst: 4096 });
    try {
      const s = new RoomService({ url: tight.url, apiKey: API_KEY, secret: SECRET });
      const rooms = await Promise.all(Array.from({ length: 6 }, (_, i) => tight.join({ token: tight.token({ roomId: `budget-${i}`, grant: {} }) })));
      let refused: { code: string; reason?: string } | null = null;
      for (let i = 0; i < 50 && !refused; i++) {
        await s.listRooms().catch((err: { code: string; reason?: string }) => void (refused = err));
      }
      assert.deepEqual(refused && { code: (refused as { code: string }).code, reason: (refused as { reason?: string }).reason }, { code: 'RATE_LIMITED', reason: 'byte-rate' });
      await Promise.all(rooms.map((r) => r.leave()));
    } finally {
      await tight.close();
    }
  });

  it('admin tokens: a truthy admin that is not true, other algorithms, odd times are refused; no iat is fine', async () => {
    const { port } = t.relay;
    const now = Math.floor(Date.now() / 1000);
    const header = (alg: unknown) => b64({ alg, typ: 'JWT' });
    const resign = (token: string, head: string) => {
      const [, payload] = token.split('.');
      return `${head}.${payload}.AAAA`;
    };
    const cases: Array<[string, string, number, string]> = [
      ['admin "true"', adminToken({ admin: 'true' }), 403, 'admin-required'],
      ['admin 1', adminToken({ admin: 1 }), 403, 'admin-required'],
      ['admin {}', adminToken({ admin: {} }), 403, 'admin-required'],
      ['admin [true]', adminToken({ admin: [true] }), 403, 'admin-required'],
      ['alg none', resign(adminToken(), header('none')), 401, 'unsupported-algorithm'],
      ['alg hs256', `${header('hs256')}.${adminToken().split('.').slice(1).join('.')}`, 401, 'unsupported-algorithm'],
      ['alg HS512', `${header('HS512')}.${adminToken().split('.').slice(1).join('.')}`, 401, 'unsupported-algorithm'],
      ['exp in a thousand years', adminToken({ exp: now + 1000 * 365 * 86400 }), 401, 'lifetime-too-long'],
      ['exp 1e300', adminToken({ exp: 1e300 }), 401, 'lifetime-too-long'],
      ['exp a string', adminToken({ exp: String(now + 60) }), 401, 'malformed'],
      ['exp missing', adminToken({ exp: undefined }), 401, 'malformed'],
      ['exp 0', adminToken({ exp: 0 }), 401, 'expired'],
      ['nbf in an hour', adminToken({ nbf: now + 3600 }), 401, 'not-yet-valid'],
      ['nbf a string', adminToken({ nbf: 'now' }), 401, 'malformed'],
      ['iss an array', adminToken({ iss: [API_KEY] }), 401, 'missing-issuer'],
      ['crit header', `${b64({ alg: 'HS256', crit: ['exp'] })}.${adminToken().split('.').slice(1).join('.')}`, 401, 'unsupported-header'],
      ['participant token of another project', signJwt({ iss: OTHER_KEY, exp: now + 60, roomId: 'x', grant: { canModerate: true } }, OTHER_SECRET), 403, 'admin-required'],
      ['a key of one project, the secret of another', adminToken({ iss: OTHER_KEY }), 401, 'bad-signature'],
    ];
    for (const [what, token, status, reason] of cases) {
      const res = await call(port, 'GET', '/api/v1/rooms', { token });
      assert.equal(res.status, status, `${what}: ${res.text}`);
      assert.equal(res.body.error?.reason, reason, what);
    }
    assert.equal((await call(port, 'GET', '/api/v1/rooms', { token: adminToken({ iat: undefined }) })).status, 200, 'iat is not required');
  });

  it('a captured webhook signature or a RoomService token is no key to anything else', async () => {
    const now = Math.floor(Date.now() / 1000);
    // what the relay signs for a webhook: the project's key, no admin, no grant
    const webhookToken = signJwt({ iss: API_KEY, iat: now, exp: now + 300, sha256: 'x' }, SECRET);
    assert.equal((await call(t.relay.port, 'GET', '/api/v1/rooms', { token: webhookToken })).body.error?.reason, 'admin-required');
    assert.equal((await rejectsWith(t.join({ token: webhookToken, roomId: 'r' }), 'INVALID_TOKEN')).reason, 'bad-claim');
    assert.equal((await rejectsWith(t.join({ token: adminToken({ grant: { canModerate: true }, roomId: 'r' }) }), 'INVALID_TOKEN')).reason, 'admin-token');
  });

  it('path parameters: encoded slashes, unicode, NUL, huge ids, bad escapes are ids or refusals, never another route', async () => {
    const { port } = t.relay;
    const token = adminToken();
    const slash = await t.join({ token: t.token({ roomId: 'a/b', grant: {} }) });
    const uni = await t.join({ token: t.token({ roomId: 'salle-é-😀', grant: {} }) });
    assert.equal((await call(port, 'GET', '/api/v1/rooms/a%2Fb', { token })).body.roomId, 'a/b');
    assert.equal((await call(port, 'GET', '/api/v1/rooms/a%2fb/participants', { token })).status, 200);
    assert.equal((await call(port, 'GET', '/api/v1/rooms/a/b', { token })).body.error?.reason, 'unknown-route');
    assert.equal((await service.getRoom('salle-é-😀')).roomId, 'salle-é-😀');
    assert.equal((await call(port, 'GET', `/api/v1/rooms/${encodeURIComponent('salle-é-😀')}`, { token })).status, 200);
    for (const [path, status] of [
      ['/api/v1/rooms/%00', 404],
      ['/api/v1/rooms/%C0%AF', 400],
      ['/api/v1/rooms/%zz', 400],
      ['/api/v1/rooms/..', 404],
      ['/api/v1/rooms/../rooms', 404],
      [`/api/v1/rooms/${'x'.repeat(1900)}`, 404],
      [`/api/v1/rooms/${'x'.repeat(3000)}`, 414],
      ['/api/v1/rooms//participants', 400],
    ] as const) {
      const res = await call(port, 'GET', path, { token });
      assert.equal(res.status, status, `${path.slice(0, 40)}: ${res.text.slice(0, 200)}`);
      assert.ok(res.text.length < 1024, 'a refusal does not echo a huge id');
    }
    // a DELETE of a room that does not exist creates nothing
    const before = t.relay.context.rooms.size;
    assert.equal((await call(port, 'DELETE', `/api/v1/rooms/${'y'.repeat(1900)}`, { token })).status, 404);
    assert.equal(t.relay.context.rooms.size, before);
    await Promise.all([slash.leave(), uni.leave()]);
  });

  it('query values: absurd limits refused, repeated parameters take the first, forged cursors reveal nothing', async () => {
    const { port } = t.relay;
    const token = adminToken();
    const rooms = await Promise.all(['q-1', 'q-2', 'q-3'].map((roomId) => t.join({ token: t.token({ roomId, participantId: 'p', grant: {} }) })));
    const theirs = await t.join({ token: t.token({ roomId: 'q-15', grant: {}, apiKey: OTHER_KEY, secret: OTHER_SECRET }) });
    for (const limit of ['0', '-1', '1e9', 'NaN', '10abc', '', '101', '1000000000', ' 5', '5 ', '0x10', '1.5', 'Infinity']) {
      const res = await call(port, 'GET', `/api/v1/rooms?limit=${encodeURIComponent(limit)}`, { token });
      assert.equal(res.body.error?.reason, 'bad-query', `rooms limit ${JSON.stringify(limit)}`);
    }
    for (const limit of ['0', '-1', '1e9', 'NaN', '10abc', '', '1001', '1.5']) {
      const res = await call(port, 'GET', `/api/v1/rooms/q-1/participants?limit=${encodeURIComponent(limit)}`, { token });
      assert.equal(res.body.error?.reason, 'bad-query', `participants limit ${JSON.stringify(limit)}`);
    }
    const first = await call(port, 'GET', '/api/v1/rooms?limit=1&limit=100', { token });
    assert.equal((first.body.rooms as unknown[]).length, 1, 'the first of repeated values');
    assert.equal((await call(port, 'GET', '/api/v1/rooms/q-1/participants?tier=viewer&tier=speaker', { token })).body.participants instanceof Array, true);
    assert.deepEqual((await call(port, 'GET', '/api/v1/rooms/q-1/participants?tier=viewer&tier=speaker', { token })).body.participants, []);
    // a cursor is only a position among this project's rooms: one made from another project's room id shows this project's rooms after it
    const forged = Buffer.from('q-1').toString('base64url');
    const after = await service.listRooms({ cursor: forged });
    assert.ok(after.rooms.every((r) => r.roomId > 'q-1' && r.roomId !== 'q-15'));
    assert.deepEqual((await other.listRooms({ cursor: Buffer.from('a').toString('base64url') })).rooms.map((r) => r.roomId), ['q-15']);
    for (const cursor of ['YQ==', 'YQ=', '%', 'x'.repeat(5000), Buffer.from('a'.repeat(300)).toString('base64url')]) {
      assert.equal((await call(port, 'GET', `/api/v1/rooms?cursor=${encodeURIComponent(cursor)}`, { token })).body.error?.reason, 'bad-cursor', cursor.slice(0, 20));
    }
    // participant cursors: of another tier refused, forged or huge refused
    const viewerCursor = Buffer.from('v0').toString('base64url');
    assert.equal((await rejectsWith(service.listParticipants('q-1', { cursor: viewerCursor }), 'INVALID_ARGUMENT')).reason, 'bad-cursor');
    for (const cursor of ['zz', Buffer.from('s99999999999').toString('base64url'), 'c'.repeat(300)]) {
      assert.equal((await call(port, 'GET', `/api/v1/rooms/q-1/participants?cursor=${cursor}`, { token })).body.error?.reason, cursor.length > 256 ? 'bad-query' : 'bad-cursor', cursor.slice(0, 20));
    }
    await Promise.all([...rooms, theirs].map((r) => r.leave()));
  });

  it('bodies: huge topics, payloads at the limit, 100k targets, prototype keys', async () => {
    const { port } = t.relay;
    const token = adminToken();
    const member = await t.join({ token: t.token({ roomId: 'bodies', participantId: 'm', grant: {} }) });
    const got: unknown[] = [];
    await member.pubsub.subscribe('t', (m) => got.push(m.payload));
    const post = (body: unknown) => call(port, 'POST', '/api/v1/rooms/bodies/data', { token, body: typeof body === 'string' ? body : JSON.stringify(body) });
    assert.equal((await post({ topic: 'x'.repeat(60 * 1024), payload: 1 })).body.error?.reason, 'bad-body');
    const longest = t.relay.context.config.maxTopicLength;
    assert.equal((await post({ topic: 'x'.repeat(longest + 1), payload: 1 })).status, 400);
    const max = t.relay.context.config.maxPayloadBytes;
    assert.equal((await post({ topic: 't', payload: 'a'.repeat(max - 2) })).status, 200, 'a payload exactly at the limit');
    assert.equal((await post({ topic: 't', payload: 'a'.repeat(max - 1) })).body.error?.reason, 'payload-too-large');
    assert.equal((await post({ topic: 't', payload: 1, to: Array.from({ length: 100_000 }, (_, i) => `p${i}`) })).body.error?.reason, 'body-too-large');
    assert.equal((await post({ topic: 't', payload: 1, to: Array.from({ length: 20_000 }, () => 'm') })).body.error?.reason, 'bad-body');
    assert.equal((await post({ topic: 't', payload: 1, to: [{}] })).body.error?.reason, 'bad-body');
    assert.equal((await post({ topic: 't', payload: 1, persist: 'yes' })).body.error?.reason, 'bad-body');
    // prototype keys are data: nothing inherits them, nothing is polluted
    assert.equal((await post('{"__proto__":{"topic":"t","payload":1}}')).body.error?.reason, 'bad-body');
    const hostile = '{"topic":"t","payload":{"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}}},"__proto__":{"persist":true}}';
    assert.equal((await post(hostile)).status, 200);
    await until(() => got.length === 2);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(Object.getPrototypeOf(got[1]), Object.prototype);
    assert.deepEqual(Object.keys(got[1] as object), ['__proto__', 'constructor']);
    assert.deepEqual(await member.pubsub.getHistory('t'), [], 'persist came from no inherited key');
    const options = await call(port, 'POST', '/api/v1/rooms/bodies/outputs/hls/start', { token, body: '{"options":{"__proto__":{"segmentSeconds":"x"}}}' });
    assert.notEqual(options.status, 500, options.text);
    if (options.status === 200) await service.stopOutput('bodies', 'hls');
    await member.leave();
  });

  it('a room that does not exist is not created, whatever is asked of it', async () => {
    const rooms = t.relay.context.rooms;
    const before = rooms.size;
    const attempts: Array<() => Promise<unknown>> = [() => service.endRoom('ghost'), () => service.removeParticipant('ghost', 'x'), () => service.startOutput('ghost', 'recording'), () => service.stopOutput('ghost', 'recording'), () => service.publishData('ghost', 't', 1, { persist: true }), () => service.listParticipants('ghost')];
    for (const attempt of attempts) {
      assert.equal((await rejectsWith(attempt(), 'NOT_FOUND')).reason, 'unknown-room');
    }
    assert.equal(rooms.size, before);
    assert.equal(rooms.openedByDomain('acme'), 0);
  });

  it('outputs: hostile livestream targets are refused as they are for members', async () => {
    const member = await t.join({ token: t.token({ roomId: 'live', grant: {} }) });
    for (const url of ['file:///etc/passwd', 'http://example.com/a/b', 'rtmp://user:pw@example.com/a/b', 'rtmp://example.com/a/b?x=1', 'rtmp://example.com/a/b#x', 'rtmp://exa mple.com/a/b', 'rtmp://[::1/a/b']) {
      assert.equal((await rejectsWith(service.startOutput('live', 'livestream', { url }), 'INVALID_ARGUMENT')).reason, 'bad-url', url);
    }
    for (const url of ['rtmp://127.0.0.1/app/key', 'rtmp://[::1]/app/key', 'rtmp://[::ffff:127.0.0.1]/app/key', 'rtmp://0.0.0.0/app/key', 'rtmp://2130706433/app/key', 'rtmp://169.254.169.254/app/key', 'rtmp://localhost/app/key', 'rtmps://10.0.0.1:443/app/key']) {
      assert.equal((await rejectsWith(service.startOutput('live', 'livestream', { url }), 'INVALID_ARGUMENT')).reason, 'private-target', url);
    }
    // refused for its arguments: the room's livestream is as it was
    assert.equal((await service.getRoom('live')).outputs.livestream.state, 'stopped');
    await member.leave();
  });

  it('refusals tell nothing of other projects and carry no stack', async () => {
    const member = await t.join({ token: t.token({ roomId: 'hidden', participantId: 'm', grant: {} }) });
    const theirs = await rejectsWith(other.getRoom('hidden'), 'NOT_FOUND');
    const none = await rejectsWith(other.getRoom('nowhere'), 'NOT_FOUND');
    assert.equal(theirs.message.replace('hidden', 'ROOM'), none.message.replace('nowhere', 'ROOM'));
    const res = await call(t.relay.port, 'GET', '/api/v1/rooms/hidden', { token: adminToken({ iss: OTHER_KEY }, OTHER_SECRET) });
    assert.deepEqual(Object.keys(res.body).sort(), ['error']);
    assert.deepEqual(Object.keys(res.body.error!).sort(), ['code', 'kind', 'message', 'reason']);
    assert.doesNotMatch(res.text, /at |\.ts|secret/i);
    const bad = await call(t.relay.port, 'GET', '/api/v1/rooms', { token: adminToken({}, 'a-guess-at-the-secret-000') });
    assert.doesNotMatch(bad.text, new RegExp(SECRET));
    await member.leave();
  });

  it('RoomService: an unreachable node is skipped, a silent one is a TIMEOUT, an endless answer is cut', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const failover = new RoomService({ url: [`ws://127.0.0.1:${deadPort}`, t.url], apiKey: API_KEY, secret: SECRET });
    assert.deepEqual((await failover.listRooms()).rooms instanceof Array, true);
    assert.equal((await rejectsWith(new RoomService({ url: `ws://127.0.0.1:${deadPort}`, apiKey: API_KEY, secret: SECRET }).listRooms(), 'CONNECTION_FAILED')).reason, 'unreachable');
    const hostile = createServer((req, res) => {
      if (req.url?.includes('silent')) return;
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
    try {
      assert.equal((await rejectsWith(new RoomService({ url, apiKey: API_KEY, secret: SECRET, timeoutMs: 300 }).getRoom('silent'), 'TIMEOUT')).code, 'TIMEOUT');
      assert.equal((await rejectsWith(new RoomService({ url, apiKey: API_KEY, secret: SECRET }).listRooms(), 'INTERNAL_ERROR')).reason, 'bad-response');
    } finally {
      hostile.closeAllConnections();
      await new Promise((resolve) => hostile.close(resolve));
    }
  });

  it('RoomService: a 2xx answer whose body does not fit the call is INTERNAL_ERROR (bad-response), never a value of another shape (getRoom resolved {} and its caller met a TypeError)', async () => {
    let answer = '{}';
    const liar = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(answer));
    });
    await new Promise<void>((resolve) => liar.listen(0, '127.0.0.1', resolve));
    const service = new RoomService({ url: `http://127.0.0.1:${(liar.address() as AddressInfo).port}`, apiKey: API_KEY, secret: SECRET });
    const stopped = { state: 'stopped' };
    const outputs = { recording: stopped, hls: stopped, livestream: stopped, transcription: stopped, whiteboard: stopped };
    const room = { roomId: 'r', createdAt: 1, counts: { speaker: 1, viewer: 0, total: 1 }, lobby: 0, outputs };
    const cases: Array<[string, () => Promise<unknown>, unknown]> = [
      ['getRoom: {}', () => service.getRoom('r'), {}],
      ['getRoom: wrong types', () => service.getRoom('r'), { roomId: 5, counts: 'lots', outputs: null, lobby: {} }],
      ['getRoom: counts that are no counts', () => service.getRoom('r'), { ...room, counts: { speaker: -1, viewer: 0, total: 1 } }],
      ['getRoom: an output missing', () => service.getRoom('r'), { ...room, outputs: { ...outputs, hls: undefined } }],
      ['listRooms: {}', () => service.listRooms(), {}],
      ['listRooms: a room without its id', () => service.listRooms(), { rooms: [room, { ...room, roomId: undefined }], nextCursor: null }],
      ['listRooms: a cursor that is no string', () => service.listRooms(), { rooms: [], nextCursor: 5 }],
      ['listParticipants: a participant of no shape', () => service.listParticipants('r'), { participants: [{ id: 5 }], nextCursor: null }],
      ['startOutput: no state', () => service.startOutput('r', 'hls'), {}],
      ['stopOutput: a state that is no string', () => service.stopOutput('r', 'recording'), { state: 5 }],
      ['publishData: an id that is no string', () => service.publishData('r', 't', 1), { id: 1, timestamp: 2, recipients: 3 }],
    ];
    try {
      for (const [what, run, body] of cases) {
        answer = JSON.stringify(body);
        const error = await rejectsWith(run(), 'INTERNAL_ERROR');
        assert.equal(error.reason, 'bad-response', what);
        assert.equal(error.kind, 'Network', what);
      }
      // answers that fit resolve, with what the relay said
      answer = JSON.stringify(room);
      assert.deepEqual(await service.getRoom('r'), room);
      answer = JSON.stringify({ rooms: [room], nextCursor: 'cg' });
      assert.deepEqual(await service.listRooms(), { rooms: [room], nextCursor: 'cg' });
      answer = JSON.stringify({ id: 'm1', timestamp: 2, recipients: 3 });
      assert.deepEqual(await service.publishData('r', 't', 1), { id: 'm1', timestamp: 2, recipients: 3 });
      answer = '{}';
      await service.endRoom('r');
      await service.removeParticipant('r', 'p');
      await service.deleteRecording('r', 'rec');
    } finally {
      liar.closeAllConnections();
      await new Promise((resolve) => liar.close(resolve));
    }
  });

  it('RoomService: a call that reached a node and lost its answer goes to the next node only if it is a read (a publish is not sent twice)', async () => {
    const seen: string[] = [];
    // node A reads the whole request, then drops the connection; node B is the real relay
    const dropper = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => res.socket?.destroy());
    });
    await new Promise<void>((resolve) => dropper.listen(0, '127.0.0.1', resolve));
    const a = `http://127.0.0.1:${(dropper.address() as AddressInfo).port}`;
    const host = await t.join({ token: t.token({ roomId: 'twice', participantId: 'host', grant: { canSubscribeData: true } }) });
    try {
      const got: unknown[] = [];
      host.pubsub.subscribe('news', (m) => got.push(m.payload));
      await new Promise((r) => setTimeout(r, 100));
      const service = new RoomService({ url: [a, t.url], apiKey: API_KEY, secret: SECRET });
      const lost = await rejectsWith(service.publishData('twice', 'news', 'once'), 'CONNECTION_FAILED');
      assert.equal(lost.reason, 'answer-lost');
      assert.deepEqual(seen, ['POST /api/v1/rooms/twice/data']);
      await new Promise((r) => setTimeout(r, 200));
      assert.deepEqual(got, [], 'not published by the next node');
      // a read goes on to the next node
      assert.equal((await service.getRoom('twice')).roomId, 'twice');
      assert.equal(seen.length, 2);
    } finally {
      await host.leave();
      dropper.closeAllConnections();
      await new Promise((resolve) => dropper.close(resolve));
    }
  });

  it('RoomService: an https node whose TLS handshake fails never had the call: a publish goes on to the next node (not answer-lost)', async () => {
    // node A accepts TCP and closes before any TLS: the request was never sent
    const closer = createNetServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => closer.listen(0, '127.0.0.1', resolve));
    const a = `https://127.0.0.1:${(closer.address() as AddressInfo).port}`;
    const host = await t.join({ token: t.token({ roomId: 'tls-first', participantId: 'host', grant: { canSubscribeData: true } }) });
    try {
      const got: unknown[] = [];
      host.pubsub.subscribe('news', (m) => got.push(m.payload));
      await new Promise((r) => setTimeout(r, 100));
      await new RoomService({ url: [a, t.url], apiKey: API_KEY, secret: SECRET }).publishData('tls-first', 'news', 'once');
      await until(() => got.length === 1, 2000, 'the publish through the next node');
      assert.deepEqual(got, ['once']);
    } finally {
      await host.leave();
      await new Promise((resolve) => closer.close(resolve));
    }
  });

  it('RoomService: absurd settings and arguments are refused as SdkErrors, by rejection; options cannot replace the topic or payload', async () => {
    for (const timeoutMs of [Number.NaN, 0, -5, Infinity, 2 ** 31, 1.5]) {
      assert.throws(() => new RoomService({ url: t.url, apiKey: API_KEY, secret: SECRET, timeoutMs }), { code: 'INVALID_ARGUMENT' }, String(timeoutMs));
    }
    assert.throws(() => new RoomService({ url: t.url, apiKey: API_KEY, secret: SECRET, tokenTtl: Number.NaN }), { code: 'INVALID_ARGUMENT' });
    const service = new RoomService({ url: t.url, apiKey: API_KEY, secret: SECRET });
    // every method rejects, none throws where it is called
    const bad = service.getRoom(123 as unknown as string);
    await rejectsWith(bad, 'INVALID_ARGUMENT');
    await rejectsWith(service.getRoom('a\uD800'), 'INVALID_ARGUMENT');
    await rejectsWith(service.listParticipants('b\uDC00x'), 'INVALID_ARGUMENT');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await rejectsWith(service.publishData('r', 't', cyclic as never), 'INVALID_ARGUMENT');
    await rejectsWith(service.publishData('r', 't', 10n as never), 'INVALID_ARGUMENT');
    const host = await t.join({ token: t.token({ roomId: 'opts', participantId: 'host', grant: { canSubscribeData: true } }) });
    try {
      const got: Array<{ topic: string; payload: unknown }> = [];
      host.pubsub.subscribe('real', (m) => got.push({ topic: m.topic, payload: m.payload }));
      host.pubsub.subscribe('other', (m) => got.push({ topic: m.topic, payload: m.payload }));
      await new Promise((r) => setTimeout(r, 100));
      await service.publishData('opts', 'real', 'mine', { topic: 'other', payload: 'theirs' } as never);
      await until(() => got.length === 1, 2000, 'the message arrived');
      assert.deepEqual(got, [{ topic: 'real', payload: 'mine' }]);
    } finally {
      await host.leave();
    }
  });

  it('each key has its own rate: a key at its limit does not slow another project', async () => {
    const slow = await startTestRelay({ apiRate: 1, keys: (() => {
      const k = new KeyStore();
      k.replaceProjects({ acme: { keys: { [API_KEY]: SECRET }, revoked: [] }, globex: { keys: { [OTHER_KEY]: OTHER_SECRET }, revoked: [] } });
      return k;
    })() });
    try {
      const a = new RoomService({ url: slow.url, apiKey: API_KEY, secret: SECRET });
      const b = new RoomService({ url: slow.url, apiKey: OTHER_KEY, secret: OTHER_SECRET });
      const results = await Promise.allSettled(Array.from({ length: 5 }, () => a.listRooms()));
      assert.ok(results.some((r) => r.status === 'rejected'));
      await b.listRooms();
    } finally {
      await slow.close();
    }
  });
});

describe('the dashboard of examples/token-server: attacks', () => {
  let t: TestRelay;
  let server: ChildProcess;
  let web = '';
  let cookie = '';
  before(async () => {
    t = await startTestRelay();
    server = spawn(process.execPath, ['examples/token-server/server.mjs'], {
      cwd: new URL('..', import.meta.url).pathname,
      env: { ...process.env, TESSERA_API_KEY: API_KEY, TESSERA_API_SECRET: SECRET, TESSERA_RELAY_URL: t.url, PORT: '0', HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    web = await new Promise<string>((resolve, reject) => {
      let out = '';
      server.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      server.once('exit', (code) => reject(new Error(`token-server exited (${code})`)));
    });
    const login = await fetch(`${web}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'mallory', password: 'tessera' }) });
    cookie = login.headers.get('set-cookie')!.split(';')[0]!;
  });
  after(async () => {
    server.kill();
    await t.close();
  });

  it('a recording path with dot segments cannot reach the relay’s other routes (/metrics, /healthz)', async () => {
    // the stage's route needs a moderator of the room: get one
    await fetch(`${web}/api/token`, { method: 'POST', headers: { 'content-type': 'application/json', cookie }, body: JSON.stringify({ room: 'r', role: 'moderator' }) });
    for (const route of ['/api/dashboard/recording', '/api/recording']) {
      for (const path of ['/recordings/../metrics', '/recordings/../healthz', '/recordings/./x', '/recordings/x/..', '/recordings/.../x']) {
        const res = await fetch(`${web}${route}?room=r&path=${encodeURIComponent(path)}`, { headers: { cookie } });
        const text = await res.text();
        assert.equal(res.status, 400, `${route} ${path}: ${res.status} ${text.slice(0, 120)}`);
        assert.doesNotMatch(text, /tessera_|"ok":true/);
      }
    }
  });

  it('a request naming another host (a page whose name was rebound to this address) is refused 421, its login included', async () => {
    const { hostname, port } = new URL(web);
    const ask = (host: string, path: string, body?: string) =>
      new Promise<number>((resolve, reject) => {
        const headers = { host, ...(body ? { 'content-type': 'application/json', origin: `http://${host}` } : {}) };
        const req = httpRequest({ host: hostname, port, path, method: body ? 'POST' : 'GET', headers }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        req.end(body);
      });
    assert.equal(await ask(`evil.example:${port}`, '/api/login', JSON.stringify({ name: 'x', password: 'tessera' })), 421);
    assert.equal(await ask('evil.example', '/examples/stage/'), 421);
    assert.equal(await ask(`127.0.0.1:${port}`, '/examples/stage/'), 200);
    assert.equal(await ask(`localhost:${port}`, '/examples/stage/'), 200);
  });

  it('its POSTs are not form-submittable: a text/plain or foreign-origin request changes nothing', async () => {
    const member = await t.join({ token: t.token({ roomId: 'csrf', participantId: 'victim', grant: {} }) });
    const service = new RoomService({ url: t.url, apiKey: API_KEY, secret: SECRET });
    const attempts: Array<[string, Record<string, string>, string]> = [
      ['/api/dashboard/end', { 'content-type': 'text/plain' }, '{"room":"csrf"}'],
      ['/api/dashboard/remove', { 'content-type': 'text/plain' }, '{"room":"csrf","participantId":"victim"}'],
      ['/api/dashboard/end', { 'content-type': 'application/x-www-form-urlencoded' }, '{"room":"csrf"}'],
      ['/api/dashboard/end', { 'content-type': 'application/json', origin: 'http://127.0.0.1:1' }, '{"room":"csrf"}'],
      ['/api/dashboard/end', {}, '{"room":"csrf"}'],
    ];
    for (const [path, headers, body] of attempts) {
      const res = await fetch(`${web}${path}`, { method: 'POST', headers: { cookie, ...headers }, body });
      assert.ok(res.status === 403 || res.status === 415, `${path} ${JSON.stringify(headers)}: ${res.status}`);
    }
    assert.deepEqual((await service.listParticipants('csrf')).participants.map((p) => p.id), ['victim']);
    const same = await fetch(`${web}/api/dashboard/remove`, { method: 'POST', headers: { cookie, 'content-type': 'application/json', origin: web }, body: '{"room":"csrf","participantId":"victim"}' });
    assert.equal(same.status, 200, 'the page itself still works');
    await member.leave().catch(() => undefined);
  });

  it('a client that asks for a recording and never reads it makes the token server hold little, not the file (it held 200 MiB a request)', async () => {
    const id = newRecordingId();
    const dir = await createRecordingDir(t.relay.context.config.recordingsDir, 'default', 'held', id);
    writeFileSync(join(dir, 'timeline.jsonl'), Buffer.alloc(96 * 1024 * 1024, 0x61));
    recordingWritten(dir);
    await fetch(`${web}/api/token`, { method: 'POST', headers: { 'content-type': 'application/json', cookie }, body: JSON.stringify({ room: 'held', role: 'moderator' }) });
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))![1]) * 1024;
    const before = rss();
    const sockets: Socket[] = [];
    try {
      for (const route of ['/api/recording', '/api/dashboard/recording']) {
        const socket = connect(Number(new URL(web).port), '127.0.0.1');
        socket.pause();
        socket.write(`GET ${route}?room=held&path=${encodeURIComponent(`/recordings/${id}/timeline.jsonl`)} HTTP/1.1\r\nHost: x\r\nCookie: ${cookie}\r\n\r\n`);
        sockets.push(socket);
      }
      await new Promise((r) => setTimeout(r, 2500));
      const grown = rss() - before;
      assert.ok(grown < 48 * 1024 * 1024, `the token server grew ${(grown / 1048576).toFixed(0)} MiB for two unread 96 MiB downloads`);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });

  it('without its login nothing of the dashboard answers; a forged webhook is refused (held)', async () => {
    for (const [method, path] of [['GET', '/api/dashboard/rooms'], ['GET', '/api/dashboard/events'], ['GET', '/api/dashboard/participants?room=r'], ['POST', '/api/dashboard/end'], ['POST', '/api/dashboard/remove'], ['GET', '/api/dashboard/recordings?room=r'], ['GET', '/api/dashboard/recording?room=r&path=/recordings/a/b']] as const) {
      const res = await fetch(`${web}${path}`, { method, headers: { 'content-type': 'application/json', cookie: 'demo_session=forged' }, ...(method === 'POST' ? { body: '{"room":"r"}' } : {}) });
      assert.equal(res.status, 401, `${method} ${path}`);
    }
    const forged = await fetch(`${web}/api/webhooks`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${signJwt({ iss: API_KEY, exp: Math.floor(Date.now() / 1000) + 60, sha256: 'x' }, 'a-guessed-secret-0123456789')}` }, body: '{"id":"x","event":"room-started","createdAt":1,"project":"default","roomId":"fake","data":{}}' });
    assert.equal(forged.status, 401);
    const events = (await (await fetch(`${web}/api/dashboard/events`, { headers: { cookie } })).json()) as { events: Array<{ roomId: string }> };
    assert.ok(events.events.every((e) => e.roomId !== 'fake'));
  });
});

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ErrorKind } from '../src/protocol/codes.ts';
import { SdkError } from '../src/errors.ts';
import { API_KEY, rejectsWith, ROOM_GRANT, SECRET, startTestRelay, type TestRelay } from './helpers.ts';

/** One test per rule of the spec's Authentication and Errors sections, through the SDK. */
describe('spec: Authentication and Errors, SDK in Node against a real relay', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ maxTtlRoom: 7200, maxTtlDomain: 600 });
    t.keys.replace({ [API_KEY]: SECRET, 'old-key': 'old-secret-0123456789' }, ['old-key']);
  });
  after(() => t.close());

  async function authError(promise: Promise<unknown>, code: string, reason?: string) {
    const err = await rejectsWith(promise, code);
    assert.ok(err instanceof SdkError, 'an SdkError');
    assert.equal(err.kind, ErrorKind.Auth, 'kind Auth');
    if (reason) assert.equal(err.reason, reason);
    assert.ok(err.message.length > 0, 'a human message');
    return err;
  }

  it('a valid token joins', async () => {
    const room = await t.join({ token: t.token({ roomId: 'auth', grant: ROOM_GRANT }) });
    assert.equal(room.id, 'auth');
    await room.leave();
  });

  it('token missing: INVALID_TOKEN', async () => {
    await authError(t.join({ token: '', roomId: 'auth' }), 'INVALID_TOKEN', 'missing');
    await authError(t.join({ token: undefined as unknown as string, roomId: 'auth' }), 'INVALID_TOKEN', 'missing');
  });

  it('token malformed: INVALID_TOKEN', async () => {
    await authError(t.join({ token: 'not-a-jwt', roomId: 'auth' }), 'INVALID_TOKEN', 'malformed');
    await authError(t.join({ token: 'a.b.c', roomId: 'auth' }), 'INVALID_TOKEN', 'malformed');
  });

  it('token badly signed: INVALID_TOKEN', async () => {
    const token = t.token({ roomId: 'auth', grant: ROOM_GRANT, secret: 'somebody-elses-secret' });
    await authError(t.join({ token }), 'INVALID_TOKEN', 'bad-signature');
  });

  it('alg none: INVALID_TOKEN', async () => {
    const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const token = `${enc({ alg: 'none', typ: 'JWT' })}.${enc({ iss: API_KEY, exp: Date.now() / 1000 + 60, roomId: 'auth', grant: { canModerate: true } })}.`;
    await authError(t.join({ token }), 'INVALID_TOKEN');
  });

  it('token past exp: INVALID_TOKEN', async () => {
    const token = t.token({ roomId: 'auth', grant: ROOM_GRANT, ttl: 10, now: Date.now() / 1000 - 3600 });
    await authError(t.join({ token }), 'INVALID_TOKEN', 'expired');
  });

  it('iss never valid: INVALID_API_KEY', async () => {
    const token = t.token({ roomId: 'auth', grant: ROOM_GRANT, apiKey: 'who-is-this' });
    await authError(t.join({ token }), 'INVALID_API_KEY', 'unknown-api-key');
  });

  it('iss revoked: INVALID_API_KEY', async () => {
    const token = t.token({ roomId: 'auth', grant: ROOM_GRANT, apiKey: 'old-key', secret: 'old-secret-0123456789' });
    await authError(t.join({ token }), 'INVALID_API_KEY', 'revoked-api-key');
  });

  it('roomId claim differs from the room joined: UNAUTHORIZED_ROOM', async () => {
    await authError(t.join({ token: t.token({ roomId: 'auth', grant: ROOM_GRANT }), roomId: 'elsewhere' }), 'UNAUTHORIZED_ROOM', 'room-mismatch');
  });

  it('participantId claim differs from the identity joining: UNAUTHORIZED_PARTICIPANT', async () => {
    const token = t.token({ roomId: 'auth', participantId: 'ada', grant: ROOM_GRANT });
    await authError(t.join({ token, participantId: 'mallory' }), 'UNAUTHORIZED_PARTICIPANT', 'participant-mismatch');
  });

  it("joinPolicy ask with canModerate: INVALID_ENTRY_CLAIM", async () => {
    // mintToken refuses this combination, so sign it by hand as a careless backend would
    const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const input = `${enc({ alg: 'HS256', typ: 'JWT' })}.${enc({ iss: API_KEY, exp: Math.floor(Date.now() / 1000) + 60, roomId: 'auth', joinPolicy: { mode: 'ask' }, grant: { canModerate: true } })}`;
    const token = `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
    await authError(t.join({ token }), 'INVALID_ENTRY_CLAIM', 'ask-with-moderate');
  });

  it('a domain-wide token may not carry privileged grants: INVALID_TOKEN', async () => {
    const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    for (const flag of ['canModerate', 'canRecord', 'canHls', 'canLivestream']) {
      const input = `${enc({ alg: 'HS256', typ: 'JWT' })}.${enc({ iss: API_KEY, exp: Math.floor(Date.now() / 1000) + 60, grant: { [flag]: true } })}`;
      const token = `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
      await authError(t.join({ token, roomId: 'auth' }), 'INVALID_TOKEN', 'privileged-grant-needs-room');
    }
  });

  it('a domain-wide token has the tighter exp ceiling: INVALID_TOKEN', async () => {
    await authError(t.join({ token: t.token({ grant: ROOM_GRANT, ttl: 601 }), roomId: 'auth' }), 'INVALID_TOKEN', 'lifetime-too-long');
    const room = await t.join({ token: t.token({ grant: ROOM_GRANT, ttl: 600 }), roomId: 'auth' });
    await room.leave();
    // the same lifetime is fine for a room-scoped token
    const scoped = await t.join({ token: t.token({ roomId: 'auth', grant: ROOM_GRANT, ttl: 3600 }) });
    await scoped.leave();
    await authError(t.join({ token: t.token({ roomId: 'auth', grant: ROOM_GRANT, ttl: 7201 }) }), 'INVALID_TOKEN', 'lifetime-too-long');
  });

  it('a domain-wide token without participantId serves many joiners, each with a fresh identity', async () => {
    const shared = t.token({ grant: { canSubscribe: true }, isViewer: true, ttl: 300 });
    const rooms = await Promise.all(Array.from({ length: 5 }, () => t.join({ token: shared, roomId: 'auth-shared' })));
    const ids = new Set(rooms.map((r) => r.localParticipant.id));
    assert.equal(ids.size, 5);
    for (const id of ids) assert.match(id, /^[0-9a-f-]{32,36}$/);
    await Promise.all(rooms.map((r) => r.leave()));
  });

  it('an action the grant does not permit is rejected by the relay: INVALID_PERMISSIONS', async () => {
    const room = await t.join({ token: t.token({ roomId: 'auth-perm', grant: ROOM_GRANT }) });
    const other = await t.join({ token: t.token({ roomId: 'auth-perm', participantId: 'target', grant: {} }) });
    const err = await rejectsWith(room.end(), 'INVALID_PERMISSIONS');
    assert.equal(err.kind, ErrorKind.Auth);
    assert.equal(err.reason, 'missing-canModerate');
    await rejectsWith(room.remove('target'), 'INVALID_PERMISSIONS');
    assert.equal(room.connected && other.connected, true, 'nothing happened');
    await room.leave();
    await other.leave();
  });

  it('an empty grant is a connected no-op participant that is still rostered on stage', async () => {
    const watcher = await t.join({ token: t.token({ roomId: 'auth-empty', grant: ROOM_GRANT }) });
    const noop = await t.join({ token: t.token({ roomId: 'auth-empty', participantId: 'noop', grant: {} }) });
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(watcher.remoteParticipants.has('noop'));
    assert.equal(noop.localParticipant.grant.canPublish, false);
    await rejectsWith(noop.end(), 'INVALID_PERMISSIONS');
    await watcher.leave();
    await noop.leave();
  });
});

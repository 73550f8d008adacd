/**
 * Issue 11, "crossing boundaries" and the log: projects (14), identities (15), removal (16),
 * the lobby (17), log lines (20), and the room quotas of domain-wide tokens (10).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '../relay/log.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken, type MintOptions } from '../src/server/mint.ts';
import { Sdk } from '../src/sdk.ts';
import type { LobbyRequest } from '../src/protocol/control.ts';
import { nextEvent, rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawConnect } from './raw.ts';

const P1 = { apiKey: 'p1-key', secret: 'p1-secret-0123456789' };
const P2 = { apiKey: 'p2-key', secret: 'p2-secret-0123456789' };

/** The same signature bytes, spelt differently: the last base64url character's spare bits flipped. */
function respell(token: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const last = token.at(-1)!;
  const other = alphabet[alphabet.indexOf(last) ^ 1]!;
  const spelt = token.slice(0, -1) + other;
  assert.notEqual(spelt, token);
  assert.deepEqual(Buffer.from(spelt.split('.')[2]!, 'base64url'), Buffer.from(token.split('.')[2]!, 'base64url'), 'same bytes');
  return spelt;
}

describe('issue 11: nothing crosses rooms, projects or identities', () => {
  let t: TestRelay;
  const lines: string[] = [];
  before(async () => {
    const keys = new KeyStore();
    keys.replaceProjects({ p1: { keys: { [P1.apiKey]: P1.secret }, revoked: [] }, p2: { keys: { [P2.apiKey]: P2.secret }, revoked: [] } });
    t = await startTestRelay({
      keys,
      logger: createLogger('info', (l) => lines.push(l)),
      lobbyCooldownSec: 30,
      maxLobbyPerRoom: 2,
      maxLobbyTtl: 5,
      maxDomainRoomsPerProject: 2,
      maxRooms: 50,
    });
  });
  after(() => t.close());
  type Claims = Omit<MintOptions, 'apiKey' | 'secret'>;
  const p1 = (claims: Claims) => mintToken({ ...P1, ...claims });
  const p2 = (claims: Claims) => mintToken({ ...P2, ...claims });
  const join = (token: string, extra: Record<string, unknown> = {}) => Sdk.join({ url: t.url, token, reconnect: false, ...extra });

  it('item 14: two projects with the same room id are two rooms: no roster, no moderation, no data across', async () => {
    const a = await join(p1({ roomId: 'same', participantId: 'alice', grant: { canPublishData: true } }));
    const mod2 = await join(p2({ roomId: 'same', participantId: 'mallory', grant: { canModerate: true, canPublishData: true } }));
    assert.equal(mod2.remoteParticipants.size, 0, 'p2 sees nobody of p1');
    assert.equal(mod2.participantCount.total, 1);
    await rejectsWith(mod2.remove('alice'), 'NOT_FOUND');
    const got: unknown[] = [];
    await a.pubsub.subscribe('chat', (m) => got.push(m.payload));
    await mod2.pubsub.publish('chat', 'from p2', { persist: true });
    assert.deepEqual(await a.pubsub.getHistory('chat'), []);
    assert.deepEqual(got, []);
    await mod2.end();
    assert.equal(a.connected, true, 'ending p2\'s room leaves p1\'s alone');
    await a.leave();
  });

  it('item 15: an identity a pinned token used is reserved: the shared audience token cannot take it', async () => {
    const host = await join(p1({ roomId: 'squat', participantId: 'anchor', grant: {} }));
    const ceo = await join(p1({ roomId: 'squat', participantId: 'ceo', grant: { canPublishData: true } }));
    await ceo.pubsub.publish('dm', 'for the host only', { to: ['anchor'], persist: true });
    await host.leave();
    const audience = p1({ isViewer: true, grant: {} });
    const err = await rejectsWith(join(audience, { roomId: 'squat', participantId: 'anchor' }), 'UNAUTHORIZED_PARTICIPANT');
    assert.equal(err.reason, 'identity-reserved');
    const me = await join(p1({ roomId: 'squat', participantId: 'anchor', grant: {} }));
    assert.deepEqual((await me.pubsub.getHistory('dm')).map((m) => m.payload), ['for the host only'], 'the pinned identity still reads it');
    await me.leave();
    await ceo.leave();
  });

  it('item 15: an unpinned id taken again after its holder left does not read what that holder sent to someone (a viewer\'s question to the host)', async () => {
    const host = await join(p1({ roomId: 'town', participantId: 'host', grant: {} }));
    const audience = p1({ roomId: 'town', isViewer: true, grant: { canPublishData: true } });
    const alice = await join(audience);
    await alice.pubsub.publish('ask', 'my question, host only', { to: ['host'], persist: true });
    assert.deepEqual((await alice.pubsub.getHistory('ask')).map((m) => m.payload), ['my question, host only'], 'the sender reads its own while it is there');
    const aliceId = alice.localParticipant.id;
    await alice.leave();
    const impostor = await join(audience, { participantId: aliceId });
    assert.deepEqual(await impostor.pubsub.getHistory('ask'), [], 'not the impostor\'s');
    await impostor.pubsub.publish('ask', 'mine', { to: ['host'], persist: true });
    assert.deepEqual((await impostor.pubsub.getHistory('ask')).map((m) => m.payload), ['mine'], 'what it sent itself it reads');
    assert.deepEqual((await host.pubsub.getHistory('ask')).map((m) => m.payload), ['my question, host only', 'mine']);
    await Promise.all([impostor.leave(), host.leave()]);
  });

  it('item 15: a pinned identity joining on 40 sockets at once, over and over, leaves no ghosts: the stage, the counts and the list hold it once, and none once it is gone', async () => {
    const pinned = p1({ roomId: 'ghosts', participantId: 'p', grant: {} });
    const observer = await join(p1({ roomId: 'ghosts', participantId: 'observer', grant: {}, isViewer: true }));
    const frame = JSON.stringify({ type: 'join', v: 1, token: pinned, participantId: 'p' });
    for (let wave = 0; wave < 6; wave++) {
      const clients = await Promise.all(Array.from({ length: 40 }, () => rawConnect(t.url)));
      // every join in one burst: the relay takes several before it has answered the first
      for (const c of clients) c.ws.send(frame);
      await Promise.all(clients.map((c) => c.next((f) => f.type === 'joined' || f.type === 'join-error', 3000).catch(() => null)));
      for (const c of clients) c.ws.close();
      await Promise.all(clients.map((c) => c.closed));
    }
    await until(() => observer.participantCount.speaker === 0, 5000, 'the counts say no speaker once every connection of "p" closed');
    assert.deepEqual((await observer.getParticipants({ tier: 'speaker' })).participants, [], 'the stage is empty');
    // "p" itself comes back, once
    const back = await join(pinned);
    const page = await observer.getParticipants({ tier: 'speaker' });
    assert.deepEqual(page.participants.map((x) => x.id), ['p']);
    await back.leave();
    await observer.leave();
  });

  it('item 16: a removal sticks to what the token means: a respelt signature and an unpinned token stay out', async () => {
    const mod = await join(p1({ roomId: 'rm', participantId: 'mod', grant: { canModerate: true } }));
    const pinned = p1({ roomId: 'rm', participantId: 'guest', grant: {} });
    await join(pinned);
    await mod.remove('guest');
    assert.equal((await rejectsWith(join(respell(pinned)), 'UNAUTHORIZED_PARTICIPANT')).reason, 'removed');
    const shared = p1({ roomId: 'rm', isViewer: true, grant: {} });
    const viewer = await join(shared, { participantId: 'v-1' });
    await until(() => mod.participantCount.viewer === 1);
    await mod.remove(viewer.localParticipant.id);
    for (const id of ['v-1', 'v-2']) {
      assert.equal((await rejectsWith(join(shared, { participantId: id }), 'UNAUTHORIZED_PARTICIPANT')).reason, 'removed', id);
    }
    const fresh = await join(p1({ roomId: 'rm', participantId: 'guest', grant: {}, jti: 'new' }));
    await fresh.leave();
    await mod.leave();
  });

  it('item 17: admission re-checks the token: a key revoked while waiting is not admitted', async () => {
    const mod = await join(p1({ roomId: 'lob1', participantId: 'mod', grant: { canModerate: true } }));
    const seen: LobbyRequest[] = [];
    mod.on('lobby-request', (r) => seen.push(r));
    const joining = join(p1({ roomId: 'lob1', participantId: 'g', grant: {}, joinPolicy: { mode: 'ask' } }));
    const refused = rejectsWith(joining, 'INVALID_API_KEY');
    await until(() => seen.length === 1);
    t.keys.replaceProjects({ p1: { keys: { [P1.apiKey]: P1.secret }, revoked: [P1.apiKey] }, p2: { keys: { [P2.apiKey]: P2.secret }, revoked: [] } });
    try {
      const [decision] = await mod.lobby.admit(['g']);
      assert.equal(decision!.ok, false);
      await refused;
    } finally {
      t.keys.replaceProjects({ p1: { keys: { [P1.apiKey]: P1.secret }, revoked: [] }, p2: { keys: { [P2.apiKey]: P2.secret }, revoked: [] } });
    }
    await mod.leave();
  });

  it('item 17: a denied joiner waits a cooldown; the lobby has a size; a huge ttl is clamped, not an instant timeout', async () => {
    const mod = await join(p1({ roomId: 'lob2', participantId: 'mod', grant: { canModerate: true } }));
    const seen: LobbyRequest[] = [];
    mod.on('lobby-request', (r) => seen.push(r));
    const denied = p1({ roomId: 'lob2', participantId: 'd', grant: {}, joinPolicy: { mode: 'ask' } });
    const first = rejectsWith(join(denied), 'ENTRY_DENIED');
    await until(() => seen.length === 1);
    await mod.lobby.deny('d');
    await first;
    assert.equal((await rejectsWith(join(denied), 'RATE_LIMITED')).reason, 'lobby-cooldown');
    let ttl = 0;
    const w1 = join(p1({ roomId: 'lob2', participantId: 'w1', grant: {}, joinPolicy: { mode: 'ask', ttl: 2_200_000 } }), { onWaiting: (i: { ttl: number }) => (ttl = i.ttl) });
    const w2 = join(p1({ roomId: 'lob2', participantId: 'w2', grant: {}, joinPolicy: { mode: 'ask' } }));
    await until(() => seen.length === 3);
    assert.equal(ttl, 5, 'clamped to --max-lobby-ttl');
    assert.equal((await rejectsWith(join(p1({ roomId: 'lob2', participantId: 'w3', grant: {}, joinPolicy: { mode: 'ask' } })), 'RATE_LIMITED')).reason, 'lobby-full');
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(mod.lobby.pending.map((r) => r.participantId).sort(), ['w1', 'w2'], 'no instant timeout');
    await mod.lobby.admit('w1');
    await mod.lobby.deny('w2');
    (await w1).leave();
    await w2.catch(() => undefined);
    await mod.leave();
  });

  it('item 17: a lobby wait ends when its token does: the ttl is clamped to the token\'s life, not held until the lobby\'s own', async () => {
    // the relay's leeway (30 s) is past its expiry: a token of 1 s waits 31 s at most, not --max-lobby-ttl
    const strict = await startTestRelay({ keys: new KeyStore({ [P1.apiKey]: P1.secret }), tokenLeeway: 0, maxLobbyTtl: 3600 });
    try {
      const mod = await Sdk.join({ url: strict.url, token: mintToken({ ...P1, roomId: 'brief', participantId: 'mod', grant: { canModerate: true } }), reconnect: false });
      let ttl = 0;
      const began = Date.now();
      const waiting = Sdk.join({ url: strict.url, token: mintToken({ ...P1, roomId: 'brief', participantId: 'w', grant: {}, ttl: 2, joinPolicy: { mode: 'ask', ttl: 3000 } }), reconnect: false, onWaiting: (i: { ttl: number }) => (ttl = i.ttl) });
      const err = await rejectsWith(waiting, 'INVALID_TOKEN');
      assert.ok(ttl >= 1 && ttl <= 2, `the wait told: ${ttl} s`);
      assert.ok(Date.now() - began < 4000, 'over when the token is');
      assert.equal(err.reason, 'expired', 'not ENTRY_TIMEOUT: asking again with this token cannot succeed');
      assert.deepEqual(mod.lobby.pending, []);
      await mod.leave();
    } finally {
      await strict.close();
    }
  });

  it('item 17: an id waiting in the lobby is not free for an unpinned direct join (it got what was sent to the waiter, whose admission then failed)', async () => {
    const mod = await join(p1({ roomId: 'clinic', participantId: 'mod', grant: { canModerate: true } }));
    const seen: LobbyRequest[] = [];
    mod.on('lobby-request', (r) => seen.push(r));
    const patient = join(p1({ roomId: 'clinic', grant: {}, joinPolicy: { mode: 'ask' } }), { participantId: 'patient-jane' });
    await until(() => seen.length === 1);
    const squat = await rejectsWith(join(p1({ roomId: 'clinic', isViewer: true, grant: {} }), { participantId: 'patient-jane' }), 'UNAUTHORIZED_PARTICIPANT');
    assert.equal(squat.reason, 'identity-in-use');
    await mod.lobby.admit('patient-jane');
    const jane = await patient;
    assert.equal(jane.localParticipant.id, 'patient-jane');
    await Promise.all([jane.leave(), mod.leave()]);
  });

  it('item 17: a pinned guest asking again from elsewhere in an empty room replaces its request; the room lives on', async () => {
    const token = p1({ roomId: 'lob3', participantId: 'g', grant: {}, joinPolicy: { mode: 'ask' } });
    const first = rejectsWith(join(token), 'ENTRY_CANCELLED');
    await until(() => t.relay.context.rooms.get('p1', 'lob3')?.lobby.size === 1, 2000, 'the first request waits');
    const second = join(token);
    assert.equal((await first).reason, 'replaced');
    await until(() => t.relay.context.rooms.get('p1', 'lob3')?.lobby.size === 1, 2000, 'the second request waits in a live room');
    const mod = await join(p1({ roomId: 'lob3', participantId: 'mod', grant: { canModerate: true } }));
    assert.deepEqual(mod.lobby.pending.map((r) => r.participantId), ['g']);
    await mod.lobby.admit('g');
    await (await second).leave();
    await mod.leave();
  });

  it('item 10: domain-wide tokens open rooms from their own quota; a room-scoped token still opens its room', async () => {
    const audience = p1({ isViewer: true, grant: {} });
    const opened = [await join(audience, { roomId: 'leak-1' }), await join(audience, { roomId: 'leak-2' })];
    assert.equal((await rejectsWith(join(audience, { roomId: 'leak-3' }), 'RATE_LIMITED')).reason, 'too-many-rooms');
    const own = await join(p1({ roomId: 'my-meeting', participantId: 'host', grant: {} }));
    const other = await join(p2({ isViewer: true, grant: {} }), { roomId: 'leak-3' });
    for (const r of [...opened, own, other]) await r.leave();
  });

  it("item 10: one project's room-scoped tokens open at most its share of the relay's rooms (half of --max-rooms with two projects): another project still opens its room", async () => {
    const rooms = t.relay.context.rooms;
    const opened: Awaited<ReturnType<typeof join>>[] = [];
    // p1's rooms open now from earlier tests count too: open until refused
    let refusal: { reason?: string; message: string } | null = null;
    for (let i = 0; i < 50 && !refusal; i++) {
      try {
        opened.push(await join(p1({ roomId: `tenant-${i}`, participantId: 'host', grant: {} })));
      } catch (err) {
        refusal = err as { reason?: string; message: string };
      }
    }
    assert.equal(refusal?.reason, 'too-many-rooms', 'refused at the share');
    assert.match(refusal!.message, /project/);
    assert.equal(rooms.countIn('p1') - rooms.openedByDomain('p1'), 25, "p1's room-scoped rooms: its share");
    const other = await join(p2({ roomId: 'p2-meeting', participantId: 'host', grant: {} }));
    await other.leave();
    for (const r of opened) await r.leave();
  });

  it('item 10: a relay of one project gives it all of --max-rooms, and --max-rooms-project sets the share', async () => {
    for (const [options, open] of [[{ maxRooms: 3 }, 3], [{ maxRooms: 3, maxRoomsPerProject: 2 }, 2]] as const) {
      const one = await startTestRelay(options);
      try {
        const rooms = [];
        for (let i = 0; i < open; i++) rooms.push(await one.join({ token: one.token({ roomId: `r${i}`, grant: {} }) }));
        assert.equal((await rejectsWith(one.join({ token: one.token({ roomId: 'one-more', grant: {} }) }), 'RATE_LIMITED')).reason, 'too-many-rooms', JSON.stringify(options));
      } finally {
        await one.close();
      }
    }
  });

  it('item 20: join-frame ids and room ids cannot forge log lines: one JSON object per line', async () => {
    lines.length = 0;
    // ids with line breaks (or any control character) are refused before anything is logged of them
    const broken = await rawConnect(t.url);
    const newlines = 'x\n{"time":"2026-01-01T00:00:00Z","level":"error","msg":"forged"}\r\n';
    broken.send({ type: 'join', v: 1, token: p1({ roomId: 'other', grant: {} }), roomId: newlines, participantId: newlines });
    assert.equal((await broken.closed).code, 4003, 'bad-join-frame');
    // an id may hold quotes and braces: it stays inside its field
    const c = await rawConnect(t.url);
    const forged = 'x","level":"error","msg":"forged"}{"a":"';
    c.send({ type: 'join', v: 1, token: p1({ roomId: 'other', grant: {} }), roomId: forged, participantId: forged });
    await c.closed;
    await until(() => lines.some((l) => l.includes('join refused')));
    for (const line of lines) {
      assert.ok(!line.includes('\n') && !line.includes('\r'), 'one line');
      const entry = JSON.parse(line) as Record<string, unknown>;
      assert.notEqual(entry.msg, 'forged');
    }
    const refused = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((e) => e.msg === 'join refused')!;
    assert.equal(refused.room, forged, 'the value is kept, inside its field');
    const mod = await join(p1({ roomId: 'logs', participantId: 'mod', grant: { canModerate: true } }));
    const ended = nextEvent(mod, 'disconnected');
    await mod.end();
    await ended;
  });
});

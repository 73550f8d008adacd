/**
 * Issue 11, what the second attack review found: frames read in the same turn as `room.end`
 * acting on the ended room, history answers copied before they were paid for, room-wide events
 * no budget paid for, and relay-wide pools a leaked domain-wide token could fill for every project.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { WebSocket } from 'ws';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken, type MintOptions } from '../src/server/mint.ts';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawConnect, rawJoin, type RawClient } from './raw.ts';

const KiB = 1024;
const socketOf = (ws: WebSocket) => (ws as unknown as { _socket: import('node:net').Socket })._socket;
const code = (f: Record<string, unknown>) => (f.error as { code?: string } | undefined)?.code;
const reason = (f: Record<string, unknown>) => (f.error as { reason?: string } | undefined)?.reason;
let seq = 900_000;

/** Requests written in one TCP write: the relay reads them in one chunk, in one turn. */
function sendTogether(c: RawClient, requests: Array<{ method: string; params: unknown }>): number[] {
  const socket = socketOf(c.ws);
  const ids = requests.map(() => ++seq);
  socket.cork();
  requests.forEach((r, i) => c.ws.send(JSON.stringify({ type: 'request', id: ids[i], ...r })));
  socket.uncork();
  return ids;
}

/** The answers to `ids` that came before the socket closed. */
async function answersTo(c: RawClient, ids: number[]): Promise<Array<Record<string, unknown>>> {
  await c.closed;
  return c.frames.filter((f) => f.type === 'response' && ids.includes(f.id as number));
}

describe('issue 11: the second attack review', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ messageRate: 2000, messageBurst: 2000 });
  });
  after(() => t.close());

  it('frames read in the same turn as room.end are refused ROOM_ENDED: nothing is kept in the ended room, no output starts', async () => {
    const moderator = await rawJoin(t.url, t.token({ roomId: 'ending', grant: { canModerate: true, canPublishData: true, canWhiteboard: true } }));
    const room = t.relay.context.rooms.get('default', 'ending')!;
    const before = t.relay.context.budgets.history.inUse;
    const publish = { method: 'pubsub.publish', params: { topic: 'kept', payload: 'x'.repeat(8000), persist: true } };
    const ids = sendTogether(moderator, [{ method: 'room.end', params: {} }, publish, publish, publish, { method: 'output.start', params: { output: 'whiteboard' } }]);
    const answers = await answersTo(moderator, ids);
    // those handled in the turn of the end are answered; those queued behind it are dropped with the socket
    assert.ok(answers.length >= 1);
    assert.equal(t.relay.context.rooms.get('default', 'ending'), undefined, 'the room is gone');
    assert.deepEqual(answers.slice(1).map(code), answers.slice(1).map(() => 'ROOM_ENDED'), 'what came after the end is refused');
    assert.equal(t.relay.context.budgets.history.inUse, before, 'the relay-wide history budget holds nothing for the ended room');
    assert.equal(room.outputs.statuses().whiteboard.state, 'stopped', 'no output started in the ended room');
    assert.equal(room.ended, true);
  });

  it('a request from a joiner waiting in the lobby is answered under its id, not with a bare error frame', async () => {
    const c = await rawConnect(t.url);
    c.send({ type: 'join', v: 1, token: t.token({ roomId: 'early', participantId: 'knocker', grant: {}, joinPolicy: { mode: 'ask' } }), participantId: 'knocker' });
    assert.equal((await c.next()).type, 'lobby');
    const answer = await c.request('participants.list', { tier: 'speaker' });
    assert.equal(code(answer), 'INVALID_STATE');
    assert.equal(reason(answer), 'waiting');
    c.ws.close();
  });

  it('pubsub.history answers the newest messages that fit in the byte burst, charged before the answer is built', async () => {
    const small = await startTestRelay({ dataByteRate: 64 * KiB, dataByteBurst: 256 * KiB, historyBytesPerRoom: 2048 * KiB, maxPayloadBytes: 64 * KiB, messageRate: 1000, messageBurst: 1000 });
    try {
      const writer = await rawJoin(small.url, small.token({ roomId: 'big-history', grant: { canPublishData: true } }));
      // a second writer shares the work: each has its own byte budget
      const writer2 = await rawJoin(small.url, small.token({ roomId: 'big-history', grant: { canPublishData: true } }));
      for (let i = 0; i < 16; i++) {
        // each writer's byte budget paces it: a refused publish is sent again a moment later
        for (let tries = 0; tries < 10; tries++) {
          const answer = await (i % 2 ? writer2 : writer).request('pubsub.publish', { topic: 'h', payload: { i, pad: 'x'.repeat(60 * KiB) }, persist: true });
          if (answer.result) break;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
      const reader = await rawJoin(small.url, small.token({ roomId: 'big-history', isViewer: true, grant: {} }));
      const first = await reader.request('pubsub.history', { topic: 'h' });
      const messages = (first.result as { messages: Array<{ payload: { i: number } }> }).messages;
      assert.ok(messages.length >= 3 && messages.length <= 4, `the newest that fit in 256 KiB: ${messages.length}`);
      assert.equal(messages.at(-1)!.payload.i, 15, 'newest last');
      assert.deepEqual(
        messages.map((m) => m.payload.i),
        messages.map((_, k) => 16 - messages.length + k),
      );
      const again = await reader.request('pubsub.history', { topic: 'h' });
      assert.equal(code(again), 'RATE_LIMITED', 'the burst was spent on the first answer');
      for (const c of [writer, writer2, reader]) c.ws.close();
    } finally {
      await small.close();
    }
  });

  it('room-wide events a request causes spend the fan-out budget: whiteboard.clear, output.start and output.stop', async () => {
    const small = await startTestRelay({ broadcastByteRate: 32 * KiB, broadcastByteBurst: 64 * KiB, messageRate: 2000, messageBurst: 2000 });
    try {
      const room = 'toggles';
      const listeners = await Promise.all(Array.from({ length: 40 }, () => rawJoin(small.url, small.token({ roomId: room, isViewer: true, grant: {} }))));
      const drawer = await rawJoin(small.url, small.token({ roomId: room, grant: { canWhiteboard: true } }));
      assert.ok((await drawer.request('output.start', { output: 'whiteboard' })).result);
      const clears = [];
      for (let i = 0; i < 100; i++) clears.push(await drawer.request('whiteboard.clear', {}));
      const refused = clears.filter((a) => reason(a) === 'fanout-rate').length;
      // 128 bytes to 40 members a clear: the 64 KiB burst pays for about a dozen, then 32 KiB/s
      assert.ok(refused > 80, `clears refused: ${refused} of 100`);
      await new Promise((r) => setTimeout(r, 2500));
      const stops = [];
      const starts = [];
      for (let i = 0; i < 40; i++) {
        stops.push(await drawer.request('output.stop', { output: 'whiteboard' }));
        starts.push(await drawer.request('output.start', { output: 'whiteboard' }));
      }
      assert.ok(starts.filter((a) => reason(a) === 'fanout-rate').length > 30, 'starting an output is refused while in debt');
      assert.equal(stops.filter((a) => reason(a) === 'fanout-rate').length, 0, 'stopping one never is (it is charged all the same)');
      for (const c of [drawer, ...listeners]) c.ws.close();
    } finally {
      await small.close();
    }
  });

  it('stream.open and stream.end announcements spend the fan-out budget like any broadcast', async () => {
    const small = await startTestRelay({ broadcastByteRate: 64 * KiB, broadcastByteBurst: 128 * KiB, messageRate: 2000, messageBurst: 2000 });
    try {
      const room = 'announcements';
      const viewers = await Promise.all(Array.from({ length: 50 }, () => rawJoin(small.url, small.token({ roomId: room, isViewer: true, grant: {} }))));
      const sender = await rawJoin(small.url, small.token({ roomId: room, grant: { canPublishData: true } }));
      const meta = { size: 0, kind: 'bytes', name: 'n'.repeat(256), mimeType: `application/${'m'.repeat(244)}` };
      let refused = 0;
      for (let i = 0; i < 150; i++) {
        const opened = await sender.request('stream.open', meta);
        const id = (opened.result as { streamId?: number } | undefined)?.streamId;
        if (id === undefined) {
          if (reason(opened) === 'fanout-rate') refused++;
          continue;
        }
        await sender.request('stream.close', { streamId: id });
      }
      // ~700 bytes to 50 viewers an open and ~60 an end: 128 KiB pays for about three
      assert.ok(refused > 100, `openings refused: ${refused} of 150`);
      for (const c of [sender, ...viewers]) c.ws.close();
    } finally {
      await small.close();
    }
  });
});

describe('issue 11: a leaked domain-wide token fills its own project\'s part of the relay\'s pools', () => {
  const EVIL = { apiKey: 'evil-key', secret: 'evil-secret-0123456789' };
  const ACME = { apiKey: 'acme-key', secret: 'acme-secret-0123456789' };
  type Claims = Omit<MintOptions, 'apiKey' | 'secret'>;
  const evil = (claims: Claims) => mintToken({ ...EVIL, ...claims });
  const acme = (claims: Claims) => mintToken({ ...ACME, ...claims });
  let t: TestRelay;
  before(async () => {
    const keys = new KeyStore();
    keys.replaceProjects({ evil: { keys: { [EVIL.apiKey]: EVIL.secret }, revoked: [] }, acme: { keys: { [ACME.apiKey]: ACME.secret }, revoked: [] } });
    t = await startTestRelay({
      keys,
      maxSubscriptionsTotal: 300,
      domainSubscriptions: 100,
      maxLobbyTotal: 20,
      domainLobby: 5,
      maxLobbyPerRoom: 5,
      historyBytesTotal: 1024 * KiB,
      domainHistoryBytes: 256 * KiB,
      historyBytesPerRoom: 512 * KiB,
      messageRate: 2000,
      messageBurst: 2000,
    });
  });
  after(() => t.close());

  it('subscriptions: the audience token\'s members run out at their project\'s part; another project\'s members still subscribe', async () => {
    const token = evil({ isViewer: true, grant: {} });
    const viewers = await Promise.all([0, 1, 2].map(() => rawJoin(t.url, token, { roomId: 'stage' })));
    const outcomes: string[] = [];
    for (const [v, viewer] of viewers.entries()) {
      for (let k = 0; k < 100; k++) {
        const answer = await viewer.request('pubsub.subscribe', { topic: `t${v}-${k}` });
        outcomes.push(answer.result ? 'ok' : (reason(answer) ?? 'error'));
      }
    }
    assert.equal(outcomes.filter((o) => o === 'ok').length, 100, 'the project\'s part: 100');
    assert.equal(outcomes.filter((o) => o === 'subscriptions-full').length, 200);
    const member = await rawJoin(t.url, acme({ roomId: 'stage', grant: {} }));
    for (let k = 0; k < 50; k++) assert.ok((await member.request('pubsub.subscribe', { topic: `mine-${k}` })).result, 'acme subscribes');
    for (const c of [...viewers, member]) c.ws.close();
    await until(() => t.relay.context.budgets.subscriptions.inUse === 0, 3000, 'every subscription given back');
    assert.equal(t.relay.context.budgets.domain('evil').subscriptions.inUse, 0, 'to the part it was taken from');
    assert.equal(t.relay.context.budgets.domain('acme').subscriptions.inUse, 0);
  });

  it('lobby: a domain-wide ask token waits in its project\'s part; another project\'s guest still gets a place', async () => {
    const token = evil({ grant: {}, joinPolicy: { mode: 'ask' } });
    const waiting: RawClient[] = [];
    const answers: string[] = [];
    for (let i = 0; i < 8; i++) {
      const c = await rawConnect(t.url);
      c.send({ type: 'join', v: 1, token, roomId: `lobby-${i}`, participantId: `knocker-${i}` });
      const first = await c.next();
      answers.push(first.type === 'lobby' ? 'waiting' : String(reason(first) ?? first.type));
      waiting.push(c);
    }
    assert.deepEqual(answers, ['waiting', 'waiting', 'waiting', 'waiting', 'waiting', 'lobby-full', 'lobby-full', 'lobby-full']);
    const guest = await rawConnect(t.url);
    guest.send({ type: 'join', v: 1, token: acme({ roomId: 'party', participantId: 'guest', grant: {}, joinPolicy: { mode: 'ask' } }), participantId: 'guest' });
    assert.equal((await guest.next()).type, 'lobby', 'acme\'s guest waits');
    for (const c of [...waiting, guest]) c.ws.close();
    await until(() => t.relay.context.budgets.lobby.inUse === 0, 3000, 'every lobby place given back');
    assert.equal(t.relay.context.budgets.domain('evil').lobby.inUse, 0, 'to the part it was taken from');
  });

  it('history: rooms a domain-wide token opened keep their project\'s part; a room-scoped room of another project still keeps history', async () => {
    const token = evil({ grant: { canPublishData: true } });
    const openers = await Promise.all([0, 1, 2].map((i) => rawJoin(t.url, token, { roomId: `opened-${i}` })));
    const kept: string[] = [];
    for (const opener of openers) {
      for (let k = 0; k < 8; k++) {
        const answer = await opener.request('pubsub.publish', { topic: `h${k}`, payload: 'x'.repeat(60 * KiB), persist: true });
        kept.push(answer.result ? 'ok' : (reason(answer) ?? 'error'));
        if (reason(answer) === 'byte-rate') await new Promise((r) => setTimeout(r, 1000));
      }
    }
    assert.ok(t.relay.context.budgets.domain('evil').history.inUse <= 256 * KiB, 'within the project\'s part');
    assert.ok(kept.includes('history-full'), `refused past it: ${kept.join(' ')}`);
    const writer = await rawJoin(t.url, acme({ roomId: 'notes', grant: { canPublishData: true } }));
    for (let k = 0; k < 4; k++) assert.ok((await writer.request('pubsub.publish', { topic: 'n', payload: 'y'.repeat(60 * KiB), persist: true })).result, 'acme keeps history');
    for (const c of [...openers, writer]) c.ws.close();
  });
});

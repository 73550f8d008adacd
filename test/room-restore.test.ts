/**
 * A room opened from its Redis record (a cluster's home died, or moved on): what the restoring
 * node holds for its members. Run on one relay through `restoreRoom`, as a cluster node does.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { restoreRoom, type StoredRoom } from '../relay/cluster/room-record.ts';
import { effectiveGrant } from '../src/protocol/grant.ts';
import { API_KEY, startTestRelay, type TestRelay } from './helpers.ts';
import { rawConnect } from './raw.ts';

const member = (id: string, position: number, extra: Record<string, unknown> = {}) => ({
  id,
  name: id,
  tier: 'speaker' as const,
  joinedAt: Date.now(),
  grant: effectiveGrant({ canPublishData: true, canSubscribeData: true }),
  pinned: true,
  tokenExp: Date.now() / 1000 + 3600,
  tokenKey: `key-${id}`,
  apiKey: API_KEY,
  domainWide: false,
  position,
  credential: `credential-${id}`,
  ...extra,
});

describe('a room restored from its record', () => {
  let t: TestRelay;
  before(async () => {
    // one away seat per token (three quarters of --max-connections 2, rounded down)
    t = await startTestRelay({ maxConnections: 2 });
  });
  after(() => t.close());

  const resume = async (credential: string) => {
    const c = await rawConnect(t.url);
    c.send({ type: 'resume', v: 1, credential });
    const answer = await c.next((f) => f.type === 'joined' || f.type === 'join-error');
    return { c, answer };
  };

  it('a member with no away seat to hold is not in the room, and its credential resumes nothing (it resumed into a room it was not in)', async () => {
    const stored = { opener: 'room', reserved: [], outputs: [], history: [], members: [member('a', 0, { tokenKey: 'shared' }), member('b', 1, { tokenKey: 'shared' })] } as unknown as StoredRoom;
    const { room, dropped } = restoreRoom(t.relay.context, 'default', 'big', stored, (fn) => fn());
    assert.deepEqual(dropped, ['b'], 'to be taken out of the record');
    assert.deepEqual([...room.members()].map((m) => m.id), ['a'], 'one seat for the token');
    const { c, answer } = await resume('credential-b');
    assert.equal(answer.type, 'join-error');
    assert.equal((answer.error as { reason: string }).reason, 'resume-unknown');
    c.ws.close();
    const back = await resume('credential-a');
    assert.equal(back.answer.type, 'joined');
    back.c.ws.close();
    await back.c.closed;
  });

  it('an unpinned member does not read the targeted messages an earlier holder of its id sent, kept before the move', async () => {
    const question = { id: 'm1', topic: 'ask', from: 'viewer-7', timestamp: 1, payload: 'an earlier holder: a private question' };
    const stored = {
      opener: 'room',
      reserved: ['host'],
      outputs: [],
      members: [member('host', 0), member('viewer-7', 1, { tier: 'viewer', pinned: false })],
      history: [{ seq: 1, topic: 'ask', json: JSON.stringify(question), from: 'viewer-7', to: ['host'], frameBytes: 100 }],
    } as unknown as StoredRoom;
    restoreRoom(t.relay.context, 'default', 'town', stored, (fn) => fn());
    for (const [credential, seen] of [['credential-viewer-7', []], ['credential-host', [question.payload]]] as const) {
      const { c, answer } = await resume(credential);
      assert.equal(answer.type, 'joined', JSON.stringify(answer));
      const history = await c.request('pubsub.history', { topic: 'ask' });
      assert.deepEqual((history.result as { messages: Array<{ payload: unknown }> }).messages.map((m) => m.payload), seen, credential);
      c.ws.close();
      await c.closed;
    }
  });
});

describe('a large room restored from its record', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ maxConnections: 10_000 });
  });
  after(() => t.close());

  it('its members, all away, are not sent each other\'s arrivals, and each seat held is not a log line of its own (1,000 speakers after 50,000 viewers: 50 million sends and 50,000 lines, a node blocked 2.6 s)', () => {
    const speakers = Array.from({ length: 20 }, (_, i) => member(`s${i}`, 1000 + i, { tokenKey: `k-s${i}` }));
    const viewers = Array.from({ length: 200 }, (_, i) => member(`v${i}`, i, { tier: 'viewer', pinned: false, tokenKey: `k-v${i}` }));
    const stored = { opener: 'room', reserved: [], outputs: [], history: [], members: [...viewers, ...speakers] } as unknown as StoredRoom;
    const sent: string[] = [];
    const lines: string[] = [];
    const log = t.relay.context.log;
    const info = log.info.bind(log);
    log.info = (message: string, fields?: Parameters<typeof info>[1]) => void (lines.push(message), info(message, fields));
    const proto = Object.getPrototypeOf(t.relay.context.rooms.getOrCreate('default', 'probe', 'room')) as { broadcastRaw: (data: Buffer, ...rest: unknown[]) => void };
    const broadcast = proto.broadcastRaw;
    proto.broadcastRaw = function (this: unknown, data: Buffer, ...rest: unknown[]) {
      sent.push(String(data));
      return broadcast.call(this, data, ...rest);
    };
    try {
      const { room } = restoreRoom(t.relay.context, 'default', 'stadium', stored, (fn) => fn());
      assert.equal([...room.members()].length, 220);
      assert.deepEqual(sent.filter((f) => f.includes('participant-joined')), [], 'no arrival sent');
      assert.equal(lines.filter((l) => l === 'away: seat held').length, 0, 'no line a member');
      assert.equal(lines.filter((l) => l === 'cluster: room restored from its record').length, 1, 'one line for the room');
    } finally {
      proto.broadcastRaw = broadcast;
      log.info = info;
    }
  });
});

describe('a room restored from a record that reserves more identities than its budget holds', () => {
  let t: TestRelay;
  // four reservations of a two-character id (400 bytes each and its id)
  before(async () => {
    t = await startTestRelay({ reservedIdsBytesPerRoom: 4 * 402 });
  });
  after(() => t.close());

  it('the reservations it made way for are given back, to be deleted from the record (they stayed there and the next home reserved them again in place of others)', () => {
    const reserved = ['m0', 'r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
    const stored = { opener: 'room', reserved, outputs: [], history: [], members: [member('m0', 0)] } as unknown as StoredRoom;
    const { room, released } = restoreRoom(t.relay.context, 'default', 'crowded-ids', stored, (fn) => fn());
    const held = [...room.pinnedIdentities()];
    assert.equal(held.length, 4, 'as many as the budget holds');
    assert.ok(held.includes('m0'), 'a member in the room keeps its own');
    assert.deepEqual([...released, ...held].sort(), [...reserved].sort(), 'each stored reservation either held or given back');
    assert.equal(released.length, 3);
  });
});

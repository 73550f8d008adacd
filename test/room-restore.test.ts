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

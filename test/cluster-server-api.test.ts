/**
 * Issue 14 and 15: the server API of a cluster. `RoomService` pointed at any node acts on rooms
 * homed on any node (the call runs at the room's home), and `listRooms` pages the project's rooms
 * wherever they live. Three nodes on a real Redis.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { KeyStore } from '../relay/token/keys.ts';
import { startRelay, type Relay } from '../relay/server.ts';
import { mintToken, type MintOptions } from '../src/server/mint.ts';
import { RoomService } from '../src/server/room-service.ts';
import type { Room } from '../src/room.ts';
import { Sdk } from '../src/sdk.ts';
import { nextEvent, rejectsWith, until } from './helpers.ts';
import { startRedis, type TestRedis } from './redis.ts';

const API_KEY = 'cluster-key';
const SECRET = 'cluster-secret-cluster-secret-32b';
const OTHER_KEY = 'other-key';
const OTHER_SECRET = 'other-secret-other-secret-other-32';

describe('the server API on three nodes', () => {
  let redis: TestRedis;
  let nodes: Relay[];
  const rooms: Room[] = [];
  const token = (claims: Omit<MintOptions, 'apiKey' | 'secret'>) => mintToken({ apiKey: API_KEY, secret: SECRET, ...claims });
  const join = async (node: number, options: Omit<Parameters<typeof Sdk.join>[0], 'url'>) => {
    const room = await Sdk.join({ url: nodes[node]!.url, ...options });
    rooms.push(room);
    return room;
  };
  const service = (node: number, apiKey = API_KEY, secret = SECRET) => new RoomService({ url: nodes[node]!.url.replace(/^ws/, 'http'), apiKey, secret });
  const homeOf = (roomId: string) => nodes.findIndex((n) => n.context.rooms.get('acme', roomId));

  before(async () => {
    redis = await startRedis();
    const keys = () => {
      const k = new KeyStore();
      k.replaceProjects({ acme: { keys: { [API_KEY]: SECRET }, revoked: [] }, globex: { keys: { [OTHER_KEY]: OTHER_SECRET }, revoked: [] } });
      return k;
    };
    nodes = await Promise.all([0, 1, 2].map(() => startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys: keys(), redis: redis.url, media: null })));
  });
  after(async () => {
    for (const room of rooms) void room.leave().catch(() => undefined);
    await Promise.all(nodes.map((n) => n.close()));
    await redis.stop();
  });

  it('listRooms pages the rooms of every node in id order; another project sees none of them', async () => {
    // each room homed on the node its first member joined through
    for (const [i, roomId] of ['r-e', 'r-a', 'r-d', 'r-b', 'r-c'].entries()) await join(i % 3, { token: token({ roomId, participantId: `m-${roomId}`, grant: {} }) });
    await join(1, { token: token({ roomId: 'r-a', participantId: 'viewer', isViewer: true, grant: {} }) });
    assert.deepEqual(['r-a', 'r-b', 'r-c', 'r-d', 'r-e'].map(homeOf), [1, 0, 1, 2, 0]);
    for (const node of [0, 1, 2]) {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await service(node).listRooms({ limit: 2, cursor });
        seen.push(...page.rooms.map((r) => r.roomId));
        if (page.rooms[0]?.roomId === 'r-a') assert.deepEqual(page.rooms[0].counts, { speaker: 1, viewer: 1, total: 2 });
        cursor = page.nextCursor;
      } while (cursor);
      assert.deepEqual(seen, ['r-a', 'r-b', 'r-c', 'r-d', 'r-e'], `through node ${node}`);
    }
    assert.deepEqual((await service(2, OTHER_KEY, OTHER_SECRET).listRooms()).rooms, []);
    await rejectsWith(service(2, OTHER_KEY, OTHER_SECRET).getRoom('r-a'), 'NOT_FOUND');
  });

  it('a room that ended is no longer listed; a node that died leaves no room behind in the list', async () => {
    const host = await join(2, { token: token({ roomId: 'gone', participantId: 'h', grant: {} }) });
    assert.ok((await service(0).listRooms({ limit: 100 })).rooms.some((r) => r.roomId === 'gone'));
    await host.leave();
    await until(async () => !(await service(0).listRooms({ limit: 100 })).rooms.some((r) => r.roomId === 'gone'), 5000, 'the ended room unlisted');
    // a lease that ran out with its node (written as a dead node leaves it): read past, and taken off the list
    const client = new Redis(redis.url);
    try {
      await client.zadd('tessera:rooms:acme', 0, 'r-0-dead');
      const page = await service(1).listRooms({ limit: 2 });
      assert.deepEqual(page.rooms.map((r) => r.roomId), ['r-a', 'r-b']);
      await until(async () => (await client.zscore('tessera:rooms:acme', 'r-0-dead')) === null, 3000, 'the dead room forgotten');
    } finally {
      client.disconnect();
    }
  });

  it('getRoom, listParticipants, publishData, startOutput, stopOutput, removeParticipant and endRoom through a node that is not the home', async () => {
    const mod = await join(0, { token: token({ roomId: 'ops', participantId: 'mod', grant: { canModerate: true } }) });
    const viewer = await join(2, { token: token({ roomId: 'ops', participantId: 'v', isViewer: true, grant: { canSubscribeData: true } }) });
    assert.equal(homeOf('ops'), 0);
    const api = service(1);
    assert.deepEqual((await api.getRoom('ops')).counts, { speaker: 1, viewer: 1, total: 2 });
    assert.deepEqual((await api.listParticipants('ops', { tier: 'viewer' })).participants.map((p) => p.id), ['v']);
    const payloads: unknown[] = [];
    await viewer.pubsub.subscribe('news', (m) => void payloads.push(m.payload));
    const sent = await api.publishData('ops', 'news', { hello: 'viewers' }, { to: ['v'] });
    assert.equal(typeof sent.timestamp, 'number');
    await until(() => payloads.length === 1, 3000, 'the message at the viewer');
    assert.deepEqual(payloads, [{ hello: 'viewers' }]);
    // refusals come back as they were made at the home
    assert.equal((await rejectsWith(api.removeParticipant('ops', 'nobody'), 'NOT_FOUND')).reason, 'unknown-participant');
    assert.equal((await rejectsWith(api.startOutput('ops', 'livestream', { url: 'http://nope' }), 'INVALID_ARGUMENT')).reason, 'bad-url');
    // an output started and stopped through another node runs at the home, by the server API
    const whiteboard = await api.startOutput('ops', 'whiteboard');
    assert.equal(whiteboard.state, 'active');
    assert.equal(nodes[0]!.context.rooms.get('acme', 'ops')!.outputs.statuses().whiteboard.by, 'server-api');
    await until(() => mod.whiteboard.status.state === 'active', 3000, 'the moderator sees the whiteboard');
    assert.equal((await service(2).stopOutput('ops', 'whiteboard')).state, 'stopped');
    await until(() => mod.whiteboard.status.state === 'stopped', 3000, 'and sees it stop');
    const removed = nextEvent(viewer, 'disconnected');
    await api.removeParticipant('ops', 'v');
    assert.equal((await removed).reason, 'removed');
    const ended = nextEvent(mod, 'disconnected');
    await service(2).endRoom('ops');
    assert.equal((await ended).reason, 'room-ended');
    await rejectsWith(api.getRoom('ops'), 'NOT_FOUND');
  });

  it('a server-API call never opens a room', async () => {
    await rejectsWith(service(1).getRoom('never-opened'), 'NOT_FOUND');
    await rejectsWith(service(1).publishData('never-opened', 't', 1), 'NOT_FOUND');
    assert.equal(homeOf('never-opened'), -1);
  });
});

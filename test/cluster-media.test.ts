/**
 * Issue 14: media across nodes. The room's media lives on its home; a publisher connected to
 * one node and a subscriber connected to another (SDK in Node on werift) exchange packets
 * through it, their signalling carried between nodes through Redis.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Room } from '../src/room.ts';
import type { TrackEvent } from '../src/room-events.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken } from '../src/server/mint.ts';
import { startRelay, type Relay } from '../relay/server.ts';
import { Sdk } from '../src/sdk.ts';
import { until } from './helpers.ts';
import { unrefLibraryDelays } from './media-fixtures.ts';
import { countPackets, fakeTrack, nodePlatform } from './media-helpers.ts';
import { startRedis, type TestRedis } from './redis.ts';

const API_KEY = 'media-key';
const SECRET = 'media-secret-media-secret-media-secret';
const AV = { canPublish: true, canSubscribe: true };

unrefLibraryDelays();

describe('issue 14: media across nodes', () => {
  let redis: TestRedis;
  let nodes: Relay[];
  const rooms: Room[] = [];
  const stops: Array<() => void> = [];

  before(async () => {
    redis = await startRedis();
    const keys = new KeyStore({ [API_KEY]: SECRET });
    nodes = await Promise.all([0, 1, 2].map(() => startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys, redis: redis.url, mediaIp: '127.0.0.1' })));
  });
  after(async () => {
    stops.forEach((s) => s());
    for (const room of rooms) void room.leave().catch(() => undefined);
    await Promise.all(nodes.map((n) => n.close()));
    await redis.stop();
  });

  it('a camera published through node 1 reaches a subscriber connected to node 2', async () => {
    const join = async (node: number, participantId: string) => {
      const room = await Sdk.join({ url: nodes[node]!.url, token: mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'av', participantId, grant: AV }), media: nodePlatform });
      rooms.push(room);
      return room;
    };
    await join(0, 'home-watcher');
    const publisher = await join(1, 'pub');
    const subscriber = await join(2, 'sub');
    const subscribed: TrackEvent[] = [];
    subscriber.on('track-subscribed', (e) => subscribed.push(e));
    const camera = fakeTrack('video');
    stops.push(camera.stop);
    await publisher.localParticipant.publish('camera', camera.track);
    await until(() => subscribed.length === 1, 10_000, 'the camera subscribed on node 2');
    const track = subscriber.remoteParticipants.get('pub')!.tracks.get('camera')!.track!;
    const got = countPackets(track);
    await until(() => got() > 20, 10_000, 'packets flowing');
    const stats = nodes[0]!.context.rooms.get('default', 'av')!.media.stats();
    assert.equal(stats.publications, 1, 'the media lives on the home');
    assert.ok(stats.in.packets > 0 && stats.out.packets > 0);
    for (const n of [nodes[1]!, nodes[2]!]) assert.equal(n.context.rooms.get('default', 'av'), undefined, 'nothing of it on the other nodes');
  });

  it("the room's home shuts down: publisher and subscriber resume on the room's new home and the camera flows again by itself", async () => {
    const home = await startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys: new KeyStore({ [API_KEY]: SECRET }), redis: redis.url, mediaIp: '127.0.0.1' });
    const join = async (urls: string[], participantId: string) => {
      const room = await Sdk.join({ url: urls, token: mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'moving', participantId, grant: AV }), media: nodePlatform, reconnect: { maxTimeMs: 15_000, initialDelayMs: 100 } });
      rooms.push(room);
      return room;
    };
    await join([home.url, nodes[0]!.url], 'opener');
    const publisher = await join([nodes[1]!.url], 'pub');
    const subscriber = await join([nodes[2]!.url], 'sub');
    const subscribed: TrackEvent[] = [];
    subscriber.on('track-subscribed', (e) => subscribed.push(e));
    const camera = fakeTrack('video');
    stops.push(camera.stop);
    await publisher.localParticipant.publish('camera', camera.track);
    await until(() => subscribed.length === 1, 10_000, 'the camera subscribed');
    assert.ok(home.context.rooms.get('default', 'moving'), 'the media lives on the first home');
    const back = Promise.all([publisher, subscriber].map((room) => new Promise<boolean>((resolve) => room.on('reconnected', ({ resumed }) => resolve(resumed)))));
    await home.close();
    assert.deepEqual(await back, [true, true], 'both sessions went on');
    const newHome = nodes.find((n) => n.context.rooms.get('default', 'moving'));
    assert.ok(newHome, 'the room lives on another node now');
    await until(() => subscribed.length === 2, 15_000, 'the camera subscribed again');
    const got = countPackets(subscriber.remoteParticipants.get('pub')!.tracks.get('camera')!.track!);
    await until(() => got() > 20, 10_000, 'packets flowing from the new home');
    assert.equal(newHome.context.rooms.get('default', 'moving')!.media.stats().publications, 1);
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { WeriftEngine } from '../relay/media/werift-engine.ts';
import { CHURN_MESSAGES } from '../relay/handlers/media.ts';
import type { Room } from '../src/room.ts';
import { rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { unrefLibraryDelays } from './media-fixtures.ts';
import { rawJoin } from './raw.ts';
import { fakeTrack, nodePlatform } from './media-helpers.ts';

const AV = { canPublish: true, canSubscribe: true } as const;

unrefLibraryDelays();

/** A relay of its own for the describe block it is called in, with a media engine of `maxTransports`. */
function mediaRelay(maxTransports: number) {
  const relay = { t: null as unknown as TestRelay, engine: new WeriftEngine({ mediaIp: '127.0.0.1', maxTransports }), stops: [] as Array<() => void> };
  before(async () => {
    relay.t = await startTestRelay({ mediaIp: '127.0.0.1', media: relay.engine });
  });
  after(async () => {
    relay.stops.forEach((s) => s());
    await relay.t.close();
  });
  return relay;
}

/** `a` publishes a camera and `b` subscribes to it; `stops` gets the track's stop. */
async function cameraSubscribed(a: Room, b: Room, stops: Array<() => void>) {
  const cam = fakeTrack('video');
  stops.push(cam.stop);
  await a.localParticipant.publish('camera', cam.track);
  await until(() => b.remoteParticipants.get(a.localParticipant.id)?.tracks.has('camera') === true, 5000, 'the camera announced');
  const publication = b.remoteParticipants.get(a.localParticipant.id)!.tracks.get('camera')!;
  await publication.subscribe();
  return publication;
}

describe('media peer connections are a relay-wide budget (--max-media-transports)', () => {
  const relay = mediaRelay(2);
  const { engine, stops } = relay;
  const join = (room: string, id: string) => relay.t.join({ token: relay.t.token({ roomId: room, participantId: id, grant: AV }), media: nodePlatform, autoSubscribe: false });

  it('past the budget a publish or subscribe in any room is refused media-full; a closed transport frees its place', async () => {
    const a = await join('budget-1', 'a');
    const b = await join('budget-1', 'b');
    const other = await join('budget-2', 'c');
    const publication = await cameraSubscribed(a, b, stops);
    assert.equal(engine.openTransports, 2);
    // another room, another member: the budget is the relay's
    const mic = fakeTrack('audio');
    stops.push(mic.stop);
    const refused = await rejectsWith(other.localParticipant.publish('microphone', mic.track), 'RATE_LIMITED');
    assert.equal(refused.reason, 'media-full');
    await publication.unsubscribe();
    await until(() => engine.openTransports === 1, 5000, 'the subscription closed on the relay');
    await other.localParticipant.publish('microphone', mic.track);
    assert.equal(engine.openTransports, 2);
    for (const room of [a, b, other]) await room.leave();
    await until(() => engine.openTransports === 0, 5000, 'every transport closed');
  });
});

describe('media peer connections: one token holds three quarters of the budget at most', () => {
  const relay = mediaRelay(5);
  const { engine, stops } = relay;

  it('a shared token\'s members subscribing took every transport of the node from everyone else: now three quarters, and another token still subscribes', async () => {
    const publisher = await relay.t.join({ token: relay.t.token({ roomId: 'share', participantId: 'p', grant: AV }), media: nodePlatform, autoSubscribe: false });
    const cam = fakeTrack('video');
    stops.push(cam.stop);
    await publisher.localParticipant.publish('camera', cam.track);
    const shared = relay.t.token({ roomId: 'share', grant: AV });
    const crowd: Room[] = [];
    for (let i = 0; i < 4; i++) crowd.push(await relay.t.join({ token: shared, participantId: `crowd-${i}`, media: nodePlatform, autoSubscribe: false }));
    const other = await relay.t.join({ token: relay.t.token({ roomId: 'share', participantId: 'x', grant: AV }), media: nodePlatform, autoSubscribe: false });
    const camera = (room: Room) => room.remoteParticipants.get('p')!.tracks.get('camera')!;
    await until(() => [...crowd, other].every((r) => r.remoteParticipants.get('p')?.tracks.has('camera') === true), 5000, 'the camera announced');
    for (const room of crowd.slice(0, 3)) await camera(room).subscribe();
    const refused = await rejectsWith(camera(crowd[3]!).subscribe(), 'RATE_LIMITED');
    assert.equal(refused.reason, 'media-full');
    assert.match(refused.message, /this token holds its share/);
    await camera(other).subscribe();
    assert.equal(engine.openTransports, 5);
    for (const room of [...crowd, other, publisher]) await room.leave();
    await until(() => engine.openTransports === 0, 5000, 'every transport closed');
  });
});

describe('media.layer is a request like any other: it spends the message budget', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ messageRate: 1, messageBurst: 5 });
  });
  after(async () => {
    await t.close();
  });

  it('a member changing layers over and over is refused RATE_LIMITED past its burst (it was answered every time)', async () => {
    const c = await rawJoin(t.url, t.token({ roomId: 'layers', grant: AV }));
    const answers = await Promise.all(Array.from({ length: 8 }, () => c.request('media.layer', { subscriptionId: 'sub-none', size: { maxWidth: 320, maxHeight: 180 } })));
    const codes = answers.map((a) => String((a.error as { code?: string } | undefined)?.code));
    assert.deepEqual(codes, ['NOT_FOUND', 'NOT_FOUND', 'NOT_FOUND', 'NOT_FOUND', 'NOT_FOUND', 'RATE_LIMITED', 'RATE_LIMITED', 'RATE_LIMITED']);
    c.ws.close();
  });

  it('an unsubscribe is never refused for its budget, and one of no subscription is counted', async () => {
    const c = await rawJoin(t.url, t.token({ roomId: 'subs', grant: AV }));
    for (let i = 0; i < 5; i++) await c.request('media.layer', { subscriptionId: 'sub-none', size: { maxWidth: 320, maxHeight: 180 } });
    const off = await c.request('media.unsubscribe', { subscriptionId: 'sub-none' });
    assert.equal((off.error as { code?: string }).code, 'NOT_FOUND', 'not refused for its budget');
    c.ws.close();
  });
});

describe('subscribe/unsubscribe churn pays for itself', () => {
  const relay = mediaRelay(8);
  before(() => {
    // a budget of 12 messages, one back a second
    Object.assign(relay.t.relay.context.config, { messageRate: 1, messageBurst: 12 });
  });

  it(`a subscription ended (or replaced) within 5 s of its making costs ${CHURN_MESSAGES} messages in all (four members of one token looping subscribe/unsubscribe at one message each held the relay up to 123 ms); one that lives costs one, so a member joining a room of 100 publications subscribes to all within its burst`, async () => {
    const a = await relay.t.join({ token: relay.t.token({ roomId: 'churn', participantId: 'a', grant: AV }), media: nodePlatform, autoSubscribe: false });
    const cam = fakeTrack('video');
    relay.stops.push(cam.stop);
    await a.localParticipant.publish('camera', cam.track);
    const c = await rawJoin(relay.t.url, relay.t.token({ roomId: 'churn', grant: AV }));
    await until(() => relay.engine.openTransports === 1, 5000, 'the camera published');
    const cycle = async () => {
      const sub = await c.request('media.subscribe', { participantId: 'a', source: 'camera' });
      if (sub.error) return (sub.error as { reason?: string }).reason;
      await c.request('media.unsubscribe', { subscriptionId: (sub.result as { subscriptionId: string }).subscriptionId });
      return 'ok';
    };
    assert.deepEqual([await cycle(), await cycle(), await cycle()], ['ok', 'ok', 'message-rate']);
    c.ws.close();
    // subscribing again without unsubscribing replaces the last: churn as well
    const d = await rawJoin(relay.t.url, relay.t.token({ roomId: 'churn', grant: AV }));
    const again = async () => String(((await d.request('media.subscribe', { participantId: 'a', source: 'camera' })).error as { reason?: string } | undefined)?.reason ?? 'ok');
    assert.deepEqual([await again(), await again(), await again(), await again()], ['ok', 'ok', 'ok', 'message-rate']);
    d.ws.close();
    await a.leave();
  });
});

describe('the SDK coalesces preferred sizes: a resize observer firing every frame stays within the message budget', () => {
  let t: TestRelay;
  const stops: Array<() => void> = [];
  before(async () => {
    t = await startTestRelay({ mediaIp: '127.0.0.1', media: new WeriftEngine({ mediaIp: '127.0.0.1', maxTransports: 4 }), messageRate: 1, messageBurst: 10 });
  });
  after(async () => {
    stops.forEach((s) => s());
    await t.close();
  });

  it('100 sizes given at once send the first and, 500 ms later, the last, which the relay has; a size the relay already has sends nothing', async () => {
    const a = await t.join({ token: t.token({ roomId: 'tiles', participantId: 'a', grant: AV }), media: nodePlatform, autoSubscribe: false });
    const b = await t.join({ token: t.token({ roomId: 'tiles', participantId: 'b', grant: AV }), media: nodePlatform, autoSubscribe: false });
    const publication = await cameraSubscribed(a, b, stops);
    // 2 of the 10 spent (subscribe, answer); one a second comes back
    const sizes = Array.from({ length: 100 }, (_, i) => ({ maxWidth: 100 + i, maxHeight: 100 + i }));
    await Promise.all(sizes.map((size) => publication.setPreferredSize(size)));
    // the relay has the last size
    const subscriptions = (t.relay.context.rooms.get('default', 'tiles')!.media as unknown as { subscriptions: Map<string, { size?: unknown }> }).subscriptions;
    assert.deepEqual([...subscriptions.values()].map((x) => x.size), [{ maxWidth: 199, maxHeight: 199 }]);
    for (let i = 0; i < 20; i++) await publication.setPreferredSize({ maxWidth: 199, maxHeight: 199 });
    // the budget has room left: the relay was asked twice, not 120 times
    await publication.setPreferredSize({ maxWidth: 320, maxHeight: 240 });
    for (const room of [a, b]) await room.leave();
  });
});

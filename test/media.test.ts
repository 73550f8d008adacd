import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Room } from '../src/room.ts';
import type { TrackEvent } from '../src/room-events.ts';
import { nextEvent, rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { unrefLibraryDelays } from './media-fixtures.ts';
import { countPackets, fakeTrack, nodePlatform } from './media-helpers.ts';

const AV = { canPublish: true, canSubscribe: true } as const;

// werift's DTLS retransmissions must not hold Node open for 30 s after the last test (media-fixtures.ts)
unrefLibraryDelays();

describe('media through the relay (SDK in Node on werift, relay on werift)', () => {
  let t: TestRelay;
  const stops: Array<() => void> = [];
  before(async () => {
    t = await startTestRelay({ mediaIp: '127.0.0.1' });
  });
  after(async () => {
    stops.forEach((s) => s());
    await t.close();
  });
  const join = (room: string, id: string, grant: Record<string, unknown> = AV, extra: Record<string, unknown> = {}) =>
    t.join({ token: t.token({ roomId: room, participantId: id, grant, ...extra }), media: nodePlatform });
  const camera = () => {
    const f = fakeTrack('video');
    stops.push(f.stop);
    return f;
  };

  it('A publishes camera and microphone; B is auto-subscribed and receives the packets', async () => {
    const a = await join('m1', 'a');
    const b = await join('m1', 'b');
    const subscribed: Array<TrackEvent & { track: MediaStreamTrack }> = [];
    b.on('track-subscribed', (e) => subscribed.push(e));
    const published: string[] = [];
    b.on('track-published', ({ publication }) => published.push(publication.source));
    const cam = await a.localParticipant.publish('camera', camera().track);
    const micSource = fakeTrack('audio');
    stops.push(micSource.stop);
    const mic = await a.localParticipant.publish('microphone', micSource.track);
    assert.deepEqual([cam.source, cam.kind, mic.kind], ['camera', 'video', 'audio']);
    assert.deepEqual([...a.localParticipant.tracks.keys()], ['camera', 'microphone']);
    await until(() => subscribed.length === 2, 8000, 'both tracks subscribed');
    assert.deepEqual(published.sort(), ['camera', 'microphone']);
    const remote = b.remoteParticipants.get('a')!;
    assert.deepEqual([...remote.tracks.keys()].sort(), ['camera', 'microphone']);
    const video = remote.tracks.get('camera')!;
    assert.equal(video.subscribed, true);
    assert.equal(video.kind, 'video');
    const got = countPackets(video.track!);
    const gotAudio = countPackets(remote.tracks.get('microphone')!.track!);
    await until(() => got() > 10 && gotAudio() > 10, 8000, 'packets flowing');
    const stats = t.relay.context.rooms.get('default', 'm1')!.media.stats();
    assert.equal(stats.publications, 2);
    assert.equal(stats.subscriptions, 2);
    assert.ok(stats.in.packets > 0 && stats.out.packets > 0);
    for (const r of [a, b]) await r.leave();
  });

  it('a late joiner sees existing tracks in participant.tracks, subscribes, and its subscription asks for a key frame', async () => {
    const a = await join('m2', 'a');
    await a.localParticipant.publish('camera', camera().track);
    const before = t.relay.context.rooms.get('default', 'm2')!.media.stats().in.keyFrameRequests;
    const late = await join('m2', 'late', AV);
    const remote = late.remoteParticipants.get('a')!;
    assert.deepEqual([...remote.tracks.keys()], ['camera'], 'present at join');
    const sub = await nextEvent(late, 'track-subscribed', 8000);
    assert.equal(sub.publication.source, 'camera');
    await until(() => t.relay.context.rooms.get('default', 'm2')!.media.stats().in.keyFrameRequests > before, 5000, 'a key frame request');
    await late.leave();
    await a.leave();
  });

  it('the relay enforces canPublish, canPublishSources and canSubscribe; the SDK sends every attempt', async () => {
    const pub = await join('m3', 'pub');
    await pub.localParticipant.publish('camera', camera().track);
    const noPublish = await join('m3', 'np', { canSubscribe: true });
    const e1 = await rejectsWith(noPublish.localParticipant.publish('camera', camera().track), 'INVALID_PERMISSIONS');
    assert.equal(e1.reason, 'missing-canPublish');
    const micOnly = await join('m3', 'mic-only', { canPublish: true, canPublishSources: ['microphone'] });
    const e2 = await rejectsWith(micOnly.localParticipant.publish('camera', camera().track), 'INVALID_PERMISSIONS');
    assert.equal(e2.reason, 'source-not-allowed');
    const noSources = await join('m3', 'none', { canPublish: true, canPublishSources: [] });
    await rejectsWith(noSources.localParticipant.publish('screen', camera().track), 'INVALID_PERMISSIONS');
    const deaf = await join('m3', 'deaf', { canPublish: true });
    const failed = await nextEvent(deaf, 'track-subscription-failed', 8000).catch(() => null);
    // the camera was published before `deaf` joined: auto-subscribe tried at once
    assert.ok(failed, 'auto-subscribe reported its refusal');
    assert.equal(failed.error.code, 'INVALID_PERMISSIONS');
    assert.equal(failed.publication.subscribed, false);
    await rejectsWith(deaf.remoteParticipants.get('pub')!.tracks.get('camera')!.subscribe(), 'INVALID_PERMISSIONS');
    await until(() => t.relay.context.rooms.get('default', 'm3')!.media.stats().subscriptions === 1, 3000);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(t.relay.context.rooms.get('default', 'm3')!.media.stats().subscriptions, 1, 'only np (canSubscribe) receives media');
    const viewer = await join('m3', 'viewer', AV, { isViewer: true });
    const e3 = await rejectsWith(viewer.localParticipant.publish('camera', camera().track), 'INVALID_ARGUMENT');
    assert.equal(e3.reason, 'viewer-cannot-publish');
    for (const r of [pub, noPublish, micOnly, noSources, deaf, viewer]) await r.leave();
  });

  it('mute and unmute are seen remotely; unpublish and leave clean up on the subscriber', async () => {
    const a = await join('m4', 'a');
    const b = await join('m4', 'b');
    const cam = await a.localParticipant.publish('camera', camera().track);
    await nextEvent(b, 'track-subscribed', 8000);
    const muted = nextEvent(b, 'track-muted');
    await cam.mute();
    assert.equal((await muted).publication.muted, true);
    assert.equal(cam.muted, true);
    const unmuted = nextEvent(b, 'track-unmuted');
    await cam.unmute();
    assert.equal((await unmuted).publication.muted, false);
    const events: string[] = [];
    for (const name of ['track-unsubscribed', 'track-unpublished'] as const) b.on(name, () => events.push(name));
    await a.localParticipant.unpublish('camera');
    await until(() => events.length === 2);
    assert.deepEqual(events, ['track-unsubscribed', 'track-unpublished']);
    assert.equal(b.remoteParticipants.get('a')!.tracks.size, 0);
    await a.localParticipant.publish('camera', camera().track);
    await nextEvent(b, 'track-subscribed', 8000);
    const left = nextEvent(b, 'participant-left');
    await a.leave();
    await left;
    await until(() => t.relay.context.rooms.get('default', 'm4')!.media.stats().subscriptions === 0, 3000, 'relay dropped the subscription');
    await b.leave();
  });

  it('packets lost on the way from the publisher are NACKed by the relay', async () => {
    const a = await join('m7', 'a');
    const lossy = fakeTrack('video', 30, (seq) => seq % 25 === 0);
    stops.push(lossy.stop);
    await a.localParticipant.publish('camera', lossy.track);
    await until(() => t.relay.context.rooms.get('default', 'm7')!.media.stats().in.nacks > 0, 8000, 'a NACK for the missing packets');
    await a.leave();
  });

  it('media is re-established after a resume, on both sides', async () => {
    const FAST = { initialDelayMs: 20, maxDelayMs: 100, maxTimeMs: 5000 };
    const a = await t.join({ token: t.token({ roomId: 'm8', participantId: 'a', grant: AV }), media: nodePlatform, reconnect: FAST });
    const b = await t.join({ token: t.token({ roomId: 'm8', participantId: 'b', grant: AV }), media: nodePlatform, reconnect: FAST });
    await a.localParticipant.publish('camera', camera().track);
    await nextEvent(b, 'track-subscribed', 8000);
    const drop = (r: typeof a) => (r as unknown as { connection: { ws: { terminate(): void } } }).connection.ws.terminate();
    // the publisher drops: it publishes again on its new connection; the subscriber gets the new track
    const again = nextEvent(b, 'track-subscribed', 10_000);
    drop(a);
    await nextEvent(a, 'reconnected', 10_000);
    const sub = await again;
    const packets = countPackets(sub.track);
    await until(() => packets() > 5, 8000, 'packets from the re-published track');
    // the subscriber drops: it subscribes again
    const resubscribed = nextEvent(b, 'track-subscribed', 10_000);
    drop(b);
    const back = await resubscribed;
    const more = countPackets(back.track);
    await until(() => more() > 5, 8000, 'packets on the new subscription');
    assert.equal(a.localParticipant.tracks.get('camera')!.source, 'camera', 'the same publication object');
    await a.leave();
    await b.leave();
  });

  it('unsubscribe and subscribe again by hand; autoSubscribe false subscribes nothing', async () => {
    const a = await join('m5', 'a');
    await a.localParticipant.publish('camera', camera().track);
    const manual = await t.join({ token: t.token({ roomId: 'm5', participantId: 'manual', grant: AV }), media: nodePlatform, autoSubscribe: false });
    const publication = manual.remoteParticipants.get('a')!.tracks.get('camera')!;
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(publication.subscribed, false);
    await publication.subscribe();
    assert.equal(publication.subscribed, true);
    assert.ok(publication.track);
    const gone = nextEvent(manual, 'track-unsubscribed');
    await publication.unsubscribe();
    await gone;
    assert.equal(publication.subscribed, false);
    await until(() => t.relay.context.rooms.get('default', 'm5')!.media.stats().subscriptions === 0);
    await publication.subscribe();
    assert.equal(publication.subscribed, true);
    await manual.leave();
    await a.leave();
  });

  it('a moderator force-unpublishes a source: forwarding stops, the publisher and everyone are told', async () => {
    const a = await join('m6', 'a');
    const mod = await join('m6', 'mod', { canModerate: true, canSubscribe: true });
    const given = camera();
    await a.localParticipant.publish('camera', given.track);
    await nextEvent(mod, 'track-subscribed', 8000);
    const told = nextEvent(a, 'local-track-unpublished');
    const gone = nextEvent(mod, 'track-unpublished');
    await mod.remoteParticipants.get('a')!.forceUnpublish('camera');
    const e = await told;
    assert.deepEqual([e.reason, e.by, e.publication.source], ['force-unpublished', 'mod', 'camera']);
    await gone;
    assert.equal(a.localParticipant.tracks.size, 0);
    assert.equal((given.track as unknown as { stopped: boolean }).stopped, false, 'a track the app gave is never stopped by the SDK');
    await rejectsWith(a.remoteParticipants.get('mod')!.forceUnpublish('camera'), 'INVALID_PERMISSIONS');
    await rejectsWith(mod.remoteParticipants.get('a')!.forceUnpublish('camera'), 'NOT_FOUND');
    await a.leave();
    await mod.leave();
  });
});

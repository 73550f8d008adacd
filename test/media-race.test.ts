import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { WeriftEngine } from '../relay/media/werift-engine.ts';
import type { Room } from '../src/room.ts';
import type { Source } from '../src/protocol/grant.ts';
import { nextEvent, rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { countingPlatform, reception, TestEngine, unrefLibraryDelays } from './media-fixtures.ts';
import { fakeTrack } from './media-helpers.ts';

/**
 * Issue 16 in Node, werift on both sides: sources published at once, calls on one source in any
 * order, device switches mid-call, and failures that the publisher must hear of at once.
 */
const AV = { canPublish: true, canSubscribe: true } as const;
const kindOf = (s: Source) => (s === 'microphone' ? 'audio' : 'video');

unrefLibraryDelays();

describe('media under concurrency (issue 16)', () => {
  let t: TestRelay;
  let engine: TestEngine;
  const platform = countingPlatform();
  const lines: Array<Record<string, unknown>> = [];
  const stops: Array<() => void> = [];
  before(async () => {
    // a short connect timeout: a publication that cannot start is given up (and told) in 1.5 s
    engine = new TestEngine(new WeriftEngine({ mediaIp: '127.0.0.1', connectTimeoutMs: 1500 }));
    const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => void lines.push({ level, msg, ...fields });
    t = await startTestRelay({ mediaIp: '127.0.0.1', media: engine, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } });
  });
  after(async () => {
    stops.forEach((s) => s());
    platform.stopAll();
    await t.close();
  });
  const join = (room: string, id: string) => t.join({ token: t.token({ roomId: room, participantId: id, grant: AV }), media: platform });
  const track = (kind: 'video' | 'audio') => {
    const f = fakeTrack(kind);
    stops.push(f.stop);
    return f.track;
  };
  const board = (room: string) => t.relay.context.rooms.get('default', room)!.media;
  /** Every source of `from` that `to` receives packets of now. */
  const flowing = (to: Room, from: string) => {
    const out: string[] = [];
    for (const [source, p] of to.remoteParticipants.get(from)?.tracks ?? []) if (p.track && Date.now() - reception(p.track).last < 300) out.push(source);
    return out.sort();
  };

  for (const sources of [['camera', 'microphone'], ['camera', 'microphone', 'screen']] as Source[][]) {
    it(`${sources.join(' + ')} published at once, 10 rounds: every publication that resolved reaches the subscriber`, async () => {
      const room = `at-once-${sources.length}`;
      const a = await join(room, 'a');
      const b = await join(room, 'b');
      const started = Date.now();
      for (let round = 0; round < 10; round++) {
        const publications = await Promise.all(sources.map((s) => a.localParticipant.publish(s, track(kindOf(s)))));
        assert.deepEqual(publications.map((p) => p.state), sources.map(() => 'published'));
        await until(() => flowing(b, 'a').join() === [...sources].sort().join(), 5000, `round ${round}: ${sources.join(', ')} flowing at b`);
        await Promise.all(sources.map((s) => a.localParticipant.unpublish(s)));
        await until(() => b.remoteParticipants.get('a')!.tracks.size === 0, 3000, `round ${round}: unpublished at b`);
      }
      const stats = board(room).stats();
      assert.deepEqual([stats.publications, stats.subscriptions, stats.negotiating], [0, 0, 0]);
      console.log(`# ${sources.join('+')}: 10 rounds in ${Date.now() - started} ms`);
      await a.leave();
      await b.leave();
    });
  }

  it('calls on one source take effect in the order made: publish twice, unpublish before the publish resolved, mute while publishing', async () => {
    const a = await join('order', 'a');
    const b = await join('order', 'b');
    const p = a.localParticipant;
    const first = p.publish('camera', track('video'));
    const second = p.publish('camera', track('video'));
    const gone = p.unpublish('camera');
    const again = p.publish('camera', track('video'));
    const muted = again.then((pub) => pub.mute());
    const [r1, r2, r3, r4] = await Promise.allSettled([first, second, gone, again]);
    assert.equal(r1.status, 'fulfilled');
    assert.equal(r2.status === 'rejected' && (r2.reason as { reason: string }).reason, 'already-published');
    assert.equal(r3.status, 'fulfilled');
    assert.equal(r4.status, 'fulfilled');
    assert.equal(r1.status === 'fulfilled' && r1.value.state, 'unpublished');
    await muted;
    await until(() => b.remoteParticipants.get('a')?.tracks.get('camera')?.muted === true, 3000, 'b sees the second camera, muted');
    await until(() => flowing(b, 'a').includes('camera'), 3000, 'and receives it');
    assert.equal(p.tracks.get('camera'), r4.status === 'fulfilled' ? r4.value : null);
    // an action on a publication that ended is refused, typed
    await rejectsWith((r1 as PromiseFulfilledResult<Awaited<typeof first>>).value.mute(), 'NOT_FOUND');
    await a.leave();
    await b.leave();
  });

  it('replaceTrack and switchDevice mid-call: the subscriber keeps receiving, without a new subscription', async () => {
    const a = await join('switch', 'a');
    const b = await join('switch', 'b');
    const camera = await a.localParticipant.publish('camera');
    assert.equal(camera.acquired, true, 'captured by the SDK (a fake device)');
    const captured = camera.track;
    await until(() => flowing(b, 'a').includes('camera'), 5000, 'camera flowing');
    const remote = b.remoteParticipants.get('a')!.tracks.get('camera')!;
    const subscribedTrack = remote.track!;
    const given = fakeTrack('video');
    stops.push(given.stop);
    // the device is switched: the captured track is stopped (it was the SDK's)
    await camera.replaceTrack(given.track);
    assert.equal((captured as unknown as { stopped: boolean }).stopped, true);
    const before = reception(subscribedTrack).packets;
    given.stop(); // only the new track could feed the subscriber now... and it stopped: nothing may arrive
    await new Promise((r) => setTimeout(r, 200));
    const frozen = reception(subscribedTrack).packets;
    assert.ok(frozen - before < 15, 'the old track no longer feeds the publication');
    await camera.switchDevice('fake-camera-2');
    await until(() => reception(subscribedTrack).packets > frozen + 5, 3000, 'packets of the switched device on the same subscription');
    assert.equal(remote.track, subscribedTrack, 'the same subscription and track');
    assert.equal((given.track as unknown as { stopped: boolean }).stopped, false, 'a track the app gave is never stopped by the SDK');
    await rejectsWith(camera.replaceTrack(track('audio')), 'INVALID_ARGUMENT');
    await a.leave();
    await b.leave();
  });

  it('a publication whose transport never comes up: publish rejects at once with a typed error; the relay logs why at info', async () => {
    const a = await join('unreachable', 'a');
    const b = await join('unreachable', 'b');
    engine.unreachable = 1;
    const started = Date.now();
    const err = await rejectsWith(a.localParticipant.publish('camera', track('video')), 'CONNECTION_FAILED');
    const took = Date.now() - started;
    assert.equal(err.reason, 'media-not-connected');
    assert.ok(took < 4000, `told when the relay gave up (1.5 s), not at the SDK's own timeout: ${took} ms`);
    const line = lines.find((l) => l.msg === 'media: publication failed to start' && l.participant === 'a');
    assert.equal(line?.level, 'info');
    assert.equal(line?.reason, 'not-connected');
    assert.equal(a.localParticipant.tracks.size, 0);
    // nothing announced, nothing left; the next try works
    assert.equal(b.remoteParticipants.get('a')!.tracks.size, 0);
    await a.localParticipant.publish('camera', track('video'));
    await until(() => flowing(b, 'a').includes('camera'), 5000, 'the next camera flows');
    await a.leave();
    await b.leave();
  });

  it('a started publication whose relay transport fails: the publisher is told (event, state, typed error); subscribers see it end', async () => {
    const a = await join('fails', 'a');
    const b = await join('fails', 'b');
    const camera = await a.localParticipant.publish('camera', track('video'));
    await until(() => flowing(b, 'a').includes('camera'), 5000, 'camera flowing');
    const told = nextEvent(a, 'local-track-unpublished', 3000);
    const ended = new Promise<{ state: string; error?: { code: string } }>((r) => camera.onEnded(r));
    const unpublished = nextEvent(b, 'track-unpublished', 3000);
    engine.transports.at(-1)!.close();
    const e = (await told) as unknown as { reason: string; error: { code: string; reason: string } };
    assert.deepEqual([e.reason, e.error.code, e.error.reason], ['failed', 'CONNECTION_FAILED', 'media-transport-failed']);
    assert.equal((await ended).state, 'failed');
    assert.equal(camera.state, 'failed');
    assert.equal(camera.error?.code, 'CONNECTION_FAILED');
    assert.equal(a.localParticipant.tracks.size, 0);
    await unpublished;
    assert.ok(lines.some((l) => l.level === 'info' && l.msg === 'media: publication failed' && l.participant === 'a'));
    await a.leave();
    await b.leave();
  });

  it('leaving while publishing and subscribing leaves nothing behind, on either side', async () => {
    const a = await join('leave', 'a');
    const b = await join('leave', 'b');
    await a.localParticipant.publish('camera', track('video'));
    const pending = [b.localParticipant.publish('microphone', track('audio')), b.localParticipant.publish('screen', track('video'))];
    await new Promise((r) => setTimeout(r, 5));
    await b.leave();
    const results = await Promise.allSettled(pending);
    for (const r of results) if (r.status === 'rejected') assert.ok(['NOT_CONNECTED', 'CONNECTION_LOST', 'ROOM_ENDED'].includes((r.reason as { code: string }).code), String(r.reason));
    await a.leave();
    await until(() => platform.open() === 0, 3000, `the SDK's peer connections closed (${platform.open()} open)`);
    await until(() => engine.inner.openTransports === 0, 3000, `the relay's peer connections closed (${engine.inner.openTransports} open)`);
  });
});

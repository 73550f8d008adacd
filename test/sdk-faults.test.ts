import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Room } from '../src/room.ts';
import type { MediaPlatform } from '../src/media/platform.ts';
import { nextEvent, rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { unrefLibraryDelays } from './media-fixtures.ts';
import { fakeTrack, nodePlatform } from './media-helpers.ts';

/**
 * Faults on the SDK's side that a relay's ordinary frames meet (a hostile-peer review, session
 * 28): a publication the SDK cannot subscribe to (Node without WebRTC; a browser past its limit
 * of peer connections, whose constructor throws) listed on joining or on reconnecting, and an
 * integrator's `onEnded` listener that throws. None may fail the join, leave a connection no one
 * owns, escape as an unhandled rejection, or stop a leave from releasing the devices.
 */
const AV = { canPublish: true, canSubscribe: true, canPublishData: true, canSubscribeData: true } as const;

unrefLibraryDelays();

/** werift's WebRTC, with a peer connection constructor that throws as Chrome's does past its limit (about 500). */
const exhausted: MediaPlatform = {
  ...nodePlatform,
  RTCPeerConnection: class {
    constructor() {
      throw new DOMException('Cannot create so many PeerConnections', 'UnknownError');
    }
  } as unknown as typeof RTCPeerConnection,
};

function drop(room: Room): void {
  (room as unknown as { connection: { ws: { terminate(): void } } }).connection.ws.terminate();
}

describe('SDK faults: a subscription that cannot be made, a listener that throws', () => {
  let t: TestRelay;
  const stops: Array<() => void> = [];
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => void rejections.push(reason);
  before(async () => {
    t = await startTestRelay({ mediaIp: '127.0.0.1' });
    process.on('unhandledRejection', onRejection);
  });
  after(async () => {
    process.off('unhandledRejection', onRejection);
    stops.forEach((s) => s());
    await t.close();
  });
  const track = (kind: 'video' | 'audio') => {
    const f = fakeTrack(kind);
    stops.push(f.stop);
    return f.track;
  };
  const token = (room: string, id: string) => t.token({ roomId: room, participantId: id, grant: AV });
  const members = (room: string) => [...(t.relay.context.rooms.get('default', room)?.members() ?? [])].map((m) => m.id).sort();

  it('a publication listed on joining that the SDK cannot subscribe to (no WebRTC, or the peer-connection limit) fails that subscription, typed, not the join; the room works and leaves', async () => {
    const bo = await t.join({ token: token('fault-join', 'bo'), media: nodePlatform });
    await bo.localParticipant.publish('camera', track('video'));
    // Node without a media platform: the join used to reject (no-webrtc) and leave its socket, heartbeat and seat behind
    const ada = await t.join({ token: token('fault-join', 'ada') });
    assert.ok(ada.remoteParticipants.get('bo')?.tracks.get('camera'), "bo's camera is listed");
    // the failed auto-subscription is told after the join resolved, when a listener can be there
    const failed = await nextEvent(ada, 'track-subscription-failed');
    assert.equal(failed.publication.source, 'camera');
    assert.equal(failed.error.code, 'INVALID_ARGUMENT');
    assert.equal(failed.error.reason, 'no-webrtc');
    const cy = await t.join({ token: token('fault-join', 'cy'), media: exhausted, autoSubscribe: false });
    const camera = cy.remoteParticipants.get('bo')!.tracks.get('camera')!;
    // a constructor's DOMException becomes the SDK's error, in the promise (it used to be thrown out of subscribe())
    const pending = camera.subscribe();
    const refused = await rejectsWith(pending, 'CONNECTION_FAILED');
    assert.equal(refused.reason, 'media-transport-failed');
    assert.deepEqual(members('fault-join'), ['ada', 'bo', 'cy']);
    // the room works
    const got: unknown[] = [];
    await ada.pubsub.subscribe('chat', (m) => void got.push(m.payload));
    await bo.pubsub.publish('chat', 'hello');
    await until(() => got.includes('hello'), 5000, 'chat heard');
    await ada.leave();
    await cy.leave();
    await until(() => members('fault-join').length === 1, 5000, 'ada and cy gone from the relay');
    await bo.leave();
    assert.deepEqual(rejections, []);
  });

  it('a reconnection listing a publication the SDK cannot subscribe to still brings the room up to date: reconnected comes, topics are subscribed again, nothing escapes', async () => {
    const ada = await t.join({ token: token('fault-resume', 'ada'), reconnect: { initialDelayMs: 1500, maxDelayMs: 2000 } });
    const bo = await t.join({ token: token('fault-resume', 'bo'), media: nodePlatform });
    const heard: string[] = [];
    await ada.pubsub.subscribe('chat', (m) => void heard.push(String(m.payload)));
    const reconnected = nextEvent(ada, 'reconnected', 15_000);
    drop(ada);
    // while ada is away, bo publishes: the relay's joined on her return lists it
    await bo.localParticipant.publish('camera', track('video'));
    const { resumed } = await reconnected;
    assert.equal(typeof resumed, 'boolean');
    assert.ok(ada.remoteParticipants.get('bo')?.tracks.get('camera'), "bo's camera is listed after the reconnection");
    await until(async () => {
      await bo.pubsub.publish('chat', 'after');
      return heard.includes('after');
    }, 5000, 'chat heard after the reconnection');
    assert.deepEqual(rejections, []);
    await ada.leave();
    await bo.leave();
  });

  it("an onEnded listener that throws stops neither a leave (every device released, disconnected said) nor a moderator's force-unpublish", async () => {
    const reported: unknown[] = [];
    const quiet = console.error;
    console.error = (...args: unknown[]) => void reported.push(args);
    try {
      const ada = await t.join({ token: token('fault-ended', 'ada'), media: nodePlatform, autoSubscribe: false });
      const mod = await t.join({ token: t.token({ roomId: 'fault-ended', participantId: 'mod', grant: { canModerate: true } }) });
      const screen = await ada.localParticipant.publish('screen', track('video'));
      screen.onEnded(() => {
        throw new Error("an integrator's bug (screen)");
      });
      const unpublished = nextEvent(ada, 'local-track-unpublished');
      await until(() => mod.remoteParticipants.get('ada')?.tracks.has('screen') === true, 5000, 'the screen announced');
      await mod.remoteParticipants.get('ada')!.forceUnpublish('screen');
      assert.equal((await unpublished).publication.source, 'screen');

      const camera = await ada.localParticipant.publish('camera', track('video'));
      const microphone = await ada.localParticipant.publish('microphone', track('audio'));
      camera.onEnded(() => {
        throw new Error("an integrator's bug (camera)");
      });
      const disconnected = nextEvent(ada, 'disconnected');
      await ada.leave();
      assert.equal((await disconnected).reason, 'left');
      assert.equal(camera.state, 'unpublished');
      assert.equal(microphone.state, 'unpublished');
      assert.equal(microphone.pc.connectionState, 'closed');
      assert.equal(ada.localParticipant.tracks.size, 0);
      assert.equal(reported.length, 2, "each listener's exception is reported once");
      await mod.leave();
    } finally {
      console.error = quiet;
    }
    assert.deepEqual(rejections, []);
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RelayError } from '../relay/errors.ts';
import type { Source } from '../src/protocol/grant.ts';
import { nextEvent, rejectsWith, startTestRelay, type TestRelay } from './helpers.ts';
import { unrefLibraryDelays } from './media-fixtures.ts';
import { fakeTrack, nodePlatform } from './media-helpers.ts';

/**
 * Issue 16: `mute()` set `muted` (and disabled the track) before the relay answered, so a
 * refused mute left the publisher believing it was muted while the room saw it live. Now
 * `muted` is the relay's answer; a mute stops the media while it is asked, an unmute sends
 * again only once accepted. The refusals are injected into the relay's media board, where
 * a real one (a publication the relay no longer holds, a fault) would be thrown.
 */
const AV = { canPublish: true, canSubscribe: true } as const;

unrefLibraryDelays();

describe('mute and unmute follow the relay (issue 16)', () => {
  let t: TestRelay;
  const stops: Array<() => void> = [];
  before(async () => {
    t = await startTestRelay({ mediaIp: '127.0.0.1' });
  });
  after(async () => {
    stops.forEach((s) => s());
    await t.close();
  });
  const join = (room: string, id: string) => t.join({ token: t.token({ roomId: room, participantId: id, grant: AV }), media: nodePlatform });
  const track = (kind: 'video' | 'audio') => {
    const f = fakeTrack(kind);
    stops.push(f.stop);
    return f.track;
  };

  /** The room's media board with its `mute` wrapped: each call is recorded, and refused while `refusal` is set. */
  function intercept(room: string, seen: (muted: boolean) => void) {
    const board = t.relay.context.rooms.get('default', room)!.media;
    const real = board.mute.bind(board);
    const control = { refusal: null as RelayError | null };
    board.mute = (member, source: Source, muted: boolean) => {
      seen(muted);
      if (control.refusal) throw control.refusal;
      real(member, source, muted);
    };
    return control;
  }

  it('a refused mute leaves `muted` false and the track enabled; a refused unmute leaves it muted and disabled', async () => {
    const a = await join('refused', 'a');
    const b = await join('refused', 'b');
    const mic = await a.localParticipant.publish('microphone', track('audio'));
    await nextEvent(b, 'track-subscribed', 8000);
    const remote = () => b.remoteParticipants.get('a')!.tracks.get('microphone')!;
    // what the publisher's side said while the relay was deciding
    const asked: Array<{ muted: boolean; enabled: boolean; state: boolean }> = [];
    const relay = intercept('refused', (muted) => asked.push({ muted, enabled: mic.track.enabled, state: mic.muted }));

    relay.refusal = new RelayError('NOT_FOUND', 'a does not publish microphone', 'not-published');
    const refused = await rejectsWith(mic.mute(), 'NOT_FOUND');
    assert.equal(refused.reason, 'not-published');
    assert.deepEqual(asked.at(-1), { muted: true, enabled: false, state: false }, 'no media left while the relay was asked, and not yet muted');
    assert.equal(mic.muted, false, 'the relay refused: not muted');
    assert.equal(mic.track.enabled, true, 'and the media flows again');
    assert.equal(remote().muted, false, 'the room never saw it muted');

    relay.refusal = null;
    const muted = nextEvent(b, 'track-muted');
    await mic.mute();
    await muted;
    assert.equal(mic.muted, true);
    assert.equal(mic.track.enabled, false);

    relay.refusal = new RelayError('INTERNAL_ERROR', 'the relay could not complete this request', 'internal');
    await rejectsWith(mic.unmute(), 'INTERNAL_ERROR');
    assert.deepEqual(asked.at(-1), { muted: false, enabled: false, state: true }, 'no media before the relay accepted the unmute');
    assert.equal(mic.muted, true, 'the relay refused: still muted');
    assert.equal(mic.track.enabled, false, 'and still silent');
    assert.equal(remote().muted, true);

    relay.refusal = null;
    const unmuted = nextEvent(b, 'track-unmuted');
    await mic.unmute();
    await unmuted;
    assert.equal(mic.muted, false);
    assert.equal(mic.track.enabled, true);
    await a.leave();
    await b.leave();
  });

  it('a track replaced after a refused mute is sent enabled: later calls see the state the relay holds', async () => {
    const a = await join('replace', 'a');
    const camera = await a.localParticipant.publish('camera', track('video'));
    const relay = intercept('replace', () => undefined);
    relay.refusal = new RelayError('NOT_FOUND', 'a does not publish camera', 'not-published');
    // queued behind the mute on the same source: it runs once the refusal is in
    const [mute, replace] = await Promise.allSettled([camera.mute(), camera.replaceTrack(track('video'))]);
    assert.equal(mute.status, 'rejected');
    assert.equal(replace.status, 'fulfilled');
    assert.equal(camera.muted, false);
    assert.equal(camera.track.enabled, true, 'the new track is not left disabled by a mute that never happened');
    await a.leave();
  });
});

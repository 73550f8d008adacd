import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { WeriftEngine } from '../relay/media/werift-engine.ts';
import { rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { unrefLibraryDelays } from './media-fixtures.ts';
import { fakeTrack, nodePlatform } from './media-helpers.ts';

const AV = { canPublish: true, canSubscribe: true } as const;

unrefLibraryDelays();

describe('media peer connections are a relay-wide budget (--max-media-transports)', () => {
  let t: TestRelay;
  const engine = new WeriftEngine({ mediaIp: '127.0.0.1', maxTransports: 2 });
  const stops: Array<() => void> = [];
  before(async () => {
    t = await startTestRelay({ mediaIp: '127.0.0.1', media: engine });
  });
  after(async () => {
    stops.forEach((s) => s());
    await t.close();
  });
  const join = (room: string, id: string) => t.join({ token: t.token({ roomId: room, participantId: id, grant: AV }), media: nodePlatform, autoSubscribe: false });

  it('past the budget a publish or subscribe in any room is refused media-full; a closed transport frees its place', async () => {
    const a = await join('budget-1', 'a');
    const b = await join('budget-1', 'b');
    const other = await join('budget-2', 'c');
    const cam = fakeTrack('video');
    stops.push(cam.stop);
    await a.localParticipant.publish('camera', cam.track);
    await until(() => b.remoteParticipants.get('a')?.tracks.has('camera') === true, 5000, 'the camera announced');
    const publication = b.remoteParticipants.get('a')!.tracks.get('camera')!;
    await publication.subscribe();
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

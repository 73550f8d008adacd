import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { nextEvent, rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';

describe('moderation: remove and end (canModerate)', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay();
  });
  after(() => t.close());
  const mod = (room: string) => t.token({ roomId: room, participantId: 'mod', grant: { canModerate: true } });

  it('remove closes the target with reason removed; a pinned token cannot come straight back, a new one can', async () => {
    const moderator = await t.join({ token: mod('m1') });
    const targetToken = t.token({ roomId: 'm1', participantId: 'guest', grant: {} });
    const guest = await t.join({ token: targetToken });
    const viewer = await t.join({ token: t.token({ roomId: 'm1', participantId: 'v1', grant: {}, isViewer: true }) });
    const guestGone = nextEvent(guest, 'disconnected');
    const viewerGone = nextEvent(viewer, 'disconnected');
    await moderator.remoteParticipants.get('guest')!.remove();
    assert.deepEqual(await guestGone, { reason: 'removed' });
    await moderator.remove('v1');
    assert.deepEqual(await viewerGone, { reason: 'removed' }, 'viewers are removed by id');
    await until(() => !moderator.remoteParticipants.has('guest'));
    const err = await rejectsWith(t.join({ token: targetToken }), 'UNAUTHORIZED_PARTICIPANT');
    assert.equal(err.reason, 'removed');
    const back = await t.join({ token: t.token({ roomId: 'm1', participantId: 'guest', grant: {}, ttl: 1200 }) });
    assert.equal(back.localParticipant.id, 'guest');
    await back.leave();
    await moderator.leave();
  });

  it('remove of yourself or of an unknown id is a clear error', async () => {
    const moderator = await t.join({ token: mod('m2') });
    await rejectsWith(moderator.remove('mod'), 'INVALID_ARGUMENT');
    await rejectsWith(moderator.remove('nobody'), 'NOT_FOUND');
    await moderator.leave();
  });

  it('end closes every session with room-ended; a later join starts a new session of the room', async () => {
    const moderator = await t.join({ token: mod('m3') });
    const others = await Promise.all([1, 2, 3].map((i) => t.join({ token: t.token({ roomId: 'm3', grant: {}, isViewer: i === 3 }) })));
    const ends = [moderator, ...others].map((r) => nextEvent(r, 'disconnected'));
    await moderator.end();
    for (const e of await Promise.all(ends)) assert.deepEqual(e, { reason: 'room-ended' });
    const again = await t.join({ token: t.token({ roomId: 'm3', grant: {} }) });
    assert.deepEqual(again.participantCount, { speaker: 1, viewer: 0, total: 1 });
    await again.leave();
  });

  it('calls after the session ended fail with NOT_CONNECTED', async () => {
    const moderator = await t.join({ token: mod('m4') });
    await moderator.leave();
    await rejectsWith(moderator.end(), 'NOT_CONNECTED');
    await rejectsWith(moderator.getParticipants({ tier: 'viewer' }), 'NOT_CONNECTED');
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RESERVATION_BYTES } from '../relay/rooms/memory-room.ts';
import { rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';

describe('issue 11: identities pinned tokens used are reserved within a byte budget', () => {
  let t: TestRelay;
  // four ids of two characters a room
  const perRoom = 4 * (RESERVATION_BYTES + 2) + 10;
  before(async () => {
    t = await startTestRelay({ reservedIdsBytesPerRoom: perRoom, reservedIdsBytesTotal: 1024 * 1024 });
  });
  after(() => t.close());
  const pinned = (participantId: string) => t.join({ token: t.token({ roomId: 'keep', participantId, grant: {} }), reconnect: false });
  const unpinned = (participantId: string) => t.join({ token: t.token({ roomId: 'keep', isViewer: true, grant: {} }), participantId, reconnect: false });
  const reserved = () => t.relay.context.budgets.reservedIds.inUse;

  it('a room kept open by one member holds at most its budget of pinned ids (each one that ever joined was kept for ever); the oldest gone make way, those present and the newest stay reserved; an ended room gives its part back', async () => {
    const anchor = await pinned('an');
    for (let i = 0; i < 10; i++) await (await pinned(`p${i}`)).leave();
    assert.ok(reserved() <= perRoom, `${reserved()} bytes reserved, over the room's ${perRoom}`);
    assert.equal(reserved(), 4 * (RESERVATION_BYTES + 2), 'the budget is used, not more');
    // the newest gone are still reserved; the oldest made way
    assert.equal((await rejectsWith(unpinned('p9'), 'UNAUTHORIZED_PARTICIPANT')).reason, 'identity-reserved');
    assert.equal((await rejectsWith(unpinned('p7'), 'UNAUTHORIZED_PARTICIPANT')).reason, 'identity-reserved');
    const squatter = await unpinned('p0');
    // the anchor, the oldest of all, stayed reserved: it was present when the others made way
    await anchor.leave();
    assert.equal((await rejectsWith(unpinned('an'), 'UNAUTHORIZED_PARTICIPANT')).reason, 'identity-reserved');
    await squatter.leave();
    await until(() => reserved() === 0, 5000, 'the ended room gave its reservations back');
    // a new session of the room starts with none
    const again = await unpinned('an');
    await again.leave();
  });
});

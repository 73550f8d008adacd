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

  it('an id seen again is the last to make way: a host who comes back is kept over ids that joined once', async () => {
    const room = (id: string) => t.join({ token: t.token({ roomId: 'again', participantId: id, grant: {} }), reconnect: false });
    const inAgain = (id: string) => t.join({ token: t.token({ roomId: 'again', isViewer: true, grant: {} }), participantId: id, reconnect: false });
    const anchor = await inAgain('anchor');
    for (const id of ['h0', 'p1', 'p2', 'p3']) await (await room(id)).leave();
    // h0 comes back: now the last to go
    await (await room('h0')).leave();
    await (await room('p4')).leave();
    // four fit: p1, the oldest of those seen once, made way; h0 is still reserved
    await (await inAgain('p1')).leave();
    assert.equal((await rejectsWith(inAgain('h0'), 'UNAUTHORIZED_PARTICIPANT')).reason, 'identity-reserved');
    await anchor.leave();
  });

  it("one project's rooms fill only that project's part of the relay's reservations: another project's pinned ids stay reserved (the relay-wide total full of one project's departed ids left another's unreserved)", async () => {
    const { KeyStore } = await import('../relay/token/keys.ts');
    const keys = new KeyStore();
    keys.replaceProjects({ a: { keys: { 'key-a': 'secret-a-0123456789abcdef' }, revoked: [] }, b: { keys: { 'key-b': 'secret-b-0123456789abcdef' }, revoked: [] } });
    const three = 3 * (RESERVATION_BYTES + 2) + 10;
    const r = await startTestRelay({ keys, reservedIdsBytesPerRoom: 1024 * 1024, reservedIdsBytesPerProject: three, reservedIdsBytesTotal: 2 * three });
    try {
      const as = (apiKey: string, secret: string) => ({
        pinned: (roomId: string, participantId: string) => r.join({ token: r.token({ apiKey, secret, roomId, participantId, grant: {} }), reconnect: false }),
        unpinned: (roomId: string, participantId: string) => r.join({ token: r.token({ apiKey, secret, roomId, isViewer: true, grant: {} }), participantId, reconnect: false }),
      });
      const a = as('key-a', 'secret-a-0123456789abcdef');
      const b = as('key-b', 'secret-b-0123456789abcdef');
      // project a fills its part (and would fill the relay's) with ids whose members are gone, in many rooms
      const keep = await Promise.all(['f1', 'f2', 'f3'].map((room) => a.unpinned(room, 'keep-open')));
      for (let i = 0; i < 12; i++) await (await a.pinned(`f${(i % 3) + 1}`, `x${i}`)).leave();
      assert.ok(r.relay.context.budgets.reservedIdsOf('a').inUse <= three);
      // project b's host leaves; its id stays reserved
      const viewer = await b.unpinned('victim', 'viewer');
      await (await b.pinned('victim', 'ho')).leave();
      assert.equal((await rejectsWith(b.unpinned('victim', 'ho'), 'UNAUTHORIZED_PARTICIPANT')).reason, 'identity-reserved');
      await Promise.all([viewer, ...keep].map((room) => room.leave()));
    } finally {
      await r.close();
    }
  });
});


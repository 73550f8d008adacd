import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { nextEvent, rejectsWith, ROOM_GRANT, startTestRelay, until, type TestRelay } from './helpers.ts';

describe('identity (DECISIONS.md: Identity)', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay();
  });
  after(() => t.close());

  it('the join option wins, then the token, then a generated UUID', async () => {
    const pinned = await t.join({ token: t.token({ roomId: 'id1', participantId: 'pinned', grant: {} }) });
    assert.equal(pinned.localParticipant.id, 'pinned');
    const chosen = await t.join({ token: t.token({ roomId: 'id1', grant: {} }), participantId: 'chosen' });
    assert.equal(chosen.localParticipant.id, 'chosen');
    const generated = await t.join({ token: t.token({ roomId: 'id1', grant: {} }) });
    assert.match(generated.localParticipant.id, /^[0-9a-f]{8}-[0-9a-f]{4}-/);
    const same = await t.join({ token: t.token({ roomId: 'id1', participantId: 'p2', grant: {} }), participantId: 'p2' });
    assert.equal(same.localParticipant.id, 'p2');
    for (const r of [pinned, chosen, generated, same]) await r.leave();
  });

  it('a token that pins the identity takes over; the older session gets duplicate-identity', async () => {
    const token = t.token({ roomId: 'id2', participantId: 'ada', grant: ROOM_GRANT });
    const observer = await t.join({ token: t.token({ roomId: 'id2', participantId: 'obs', grant: ROOM_GRANT }) });
    const first = await t.join({ token });
    const dropped = nextEvent(first, 'disconnected');
    const second = await t.join({ token });
    assert.deepEqual(await dropped, { reason: 'duplicate-identity' });
    assert.equal(second.localParticipant.id, 'ada');
    await until(() => observer.remoteParticipants.has('ada') && observer.participantCount.total === 2, 2000, 'observer sees ada once');
    assert.equal(observer.remoteParticipants.size, 1);
    await second.leave();
    await observer.leave();
  });

  it('a takeover of the room\'s only member (a reload, a second tab) keeps the room: its history and whiteboard survive', async () => {
    const token = t.token({ roomId: 'solo', participantId: 'host', grant: { canPublishData: true, canWhiteboard: true } });
    const first = await t.join({ token, reconnect: false });
    await first.pubsub.publish('notes', 'kept for late joiners', { persist: true });
    await first.whiteboard.start();
    const before = t.relay.context.rooms.get('default', 'solo');
    assert.ok(before);
    const second = await t.join({ token, reconnect: false });
    assert.equal(t.relay.context.rooms.get('default', 'solo'), before, 'the same room, not a new one');
    assert.deepEqual((await second.pubsub.getHistory('notes')).map((m) => m.payload), ['kept for late joiners']);
    assert.equal(second.whiteboard.state, 'active');
    await second.leave();
    await until(() => t.relay.context.rooms.get('default', 'solo') === undefined, 2000, 'the room ends once it is empty');
  });

  it('limits: participants per room and rooms per relay, with clear errors; a takeover needs no seat', async () => {
    const small = await startTestRelay({ maxRoomSize: 2, maxRooms: 2 });
    try {
      const a = await small.join({ token: small.token({ roomId: 'one', participantId: 'a', grant: {} }) });
      await small.join({ token: small.token({ roomId: 'one', grant: {}, isViewer: true }) });
      const full = await rejectsWith(small.join({ token: small.token({ roomId: 'one', grant: {} }) }), 'RATE_LIMITED');
      assert.equal(full.reason, 'room-full');
      assert.equal(full.kind, 'Request');
      // the same pinned identity again takes its own seat over
      const again = await small.join({ token: small.token({ roomId: 'one', participantId: 'a', grant: {} }) });
      assert.equal(again.localParticipant.id, 'a');
      await until(() => !a.connected, 2000, 'the older session closed');
      await small.join({ token: small.token({ roomId: 'two', grant: {} }) });
      const rooms = await rejectsWith(small.join({ token: small.token({ roomId: 'three', grant: {} }) }), 'RATE_LIMITED');
      assert.equal(rooms.reason, 'too-many-rooms');
      const lobby = await rejectsWith(small.join({ token: small.token({ roomId: 'four', grant: {}, joinPolicy: { mode: 'ask' } }) }), 'RATE_LIMITED');
      assert.equal(lobby.reason, 'too-many-rooms');
    } finally {
      await small.close();
    }
  });

  it('limits: the stage is bounded (--max-stage: every join carries the whole stage); viewers, takeovers and freed seats still get in', async () => {
    const small = await startTestRelay({ maxStage: 2 });
    try {
      const a = await small.join({ token: small.token({ roomId: 'stage', participantId: 'a', grant: {} }) });
      const b = await small.join({ token: small.token({ roomId: 'stage', participantId: 'b', grant: {} }) });
      const full = await rejectsWith(small.join({ token: small.token({ roomId: 'stage', participantId: 'c', grant: {} }) }), 'RATE_LIMITED');
      assert.equal(full.reason, 'stage-full');
      const asking = await rejectsWith(small.join({ token: small.token({ roomId: 'stage', participantId: 'd', grant: {}, joinPolicy: { mode: 'ask' } }) }), 'RATE_LIMITED');
      assert.equal(asking.reason, 'stage-full', 'not queued in the lobby for a seat that is not there');
      const viewer = await small.join({ token: small.token({ roomId: 'stage', grant: {}, isViewer: true }) });
      // a pinned viewer taken over by a speaker's token of the same id would go on stage: not while it is full
      const pinnedViewer = await small.join({ token: small.token({ roomId: 'stage', participantId: 'v', grant: {}, isViewer: true }) });
      assert.equal((await rejectsWith(small.join({ token: small.token({ roomId: 'stage', participantId: 'v', grant: {} }) }), 'RATE_LIMITED')).reason, 'stage-full');
      assert.ok(pinnedViewer.connected, 'the viewer stays');
      await pinnedViewer.leave();
      const again = await small.join({ token: small.token({ roomId: 'stage', participantId: 'a', grant: {} }) });
      await until(() => !a.connected, 2000, 'the older session closed');
      await b.leave();
      const c = await small.join({ token: small.token({ roomId: 'stage', participantId: 'c', grant: {} }) });
      assert.deepEqual([...c.remoteParticipants.keys()], ['a']);
      await Promise.all([again.leave(), c.leave(), viewer.leave()]);
    } finally {
      await small.close();
    }
  });

  it('an unpinned token can never displace anyone: UNAUTHORIZED_PARTICIPANT', async () => {
    const holder = await t.join({ token: t.token({ roomId: 'id3', grant: {} }), participantId: 'seat' });
    const err = await rejectsWith(t.join({ token: t.token({ roomId: 'id3', grant: {} }), participantId: 'seat' }), 'UNAUTHORIZED_PARTICIPANT');
    assert.equal(err.reason, 'identity-in-use');
    assert.equal(holder.connected, true);
    await holder.leave();
  });
});

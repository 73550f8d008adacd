import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ErrorKind } from '../src/protocol/codes.ts';
import { SdkError } from '../src/errors.ts';
import { nextEvent, rejectsWith, ROOM_GRANT, startTestRelay, type TestRelay } from './helpers.ts';

describe('Sdk.join against a real relay', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay();
  });
  after(() => t.close());

  it('resolves to a room with the local participant and the grant the relay reports', async () => {
    const room = await t.join({ token: t.token({ roomId: 'r1', participantId: 'ada', grant: ROOM_GRANT }), name: 'Ada' });
    assert.equal(room.id, 'r1');
    assert.equal(room.localParticipant.id, 'ada');
    assert.equal(room.localParticipant.name, 'Ada');
    assert.equal(room.localParticipant.isViewer, false);
    assert.equal(room.localParticipant.grant.canPublish, true);
    assert.equal(room.localParticipant.grant.canSubscribeData, true, 'canSubscribeData defaults to true');
    assert.equal(room.localParticipant.grant.canModerate, false);
    assert.deepEqual(room.localParticipant.grant.canPublishSources, ['camera', 'microphone', 'screen']);
    assert.deepEqual(room.participantCount, { speaker: 1, viewer: 0, total: 1 });
    assert.equal(room.remoteParticipants.size, 0);
    const gone = nextEvent(room, 'disconnected');
    await room.leave();
    assert.deepEqual(await gone, { reason: 'left' });
  });

  it('rejects an expired token with an Auth SdkError carrying code and reason', async () => {
    const err = await rejectsWith(t.join({ token: t.token({ roomId: 'r1', grant: {}, ttl: 1, now: Date.now() / 1000 - 100 }) }), 'INVALID_TOKEN');
    assert.ok(err instanceof SdkError);
    assert.equal(err.kind, ErrorKind.Auth);
    assert.equal(err.reason, 'expired');
  });

  it('a join frame larger than the relay reads before a join (a 20,000-character name) is PAYLOAD_TOO_LARGE (frame-too-large), not a bare CONNECTION_FAILED', async () => {
    const err = await rejectsWith(t.join({ token: t.token({ roomId: 'r1', grant: {} }), name: 'n'.repeat(20_000), url: [t.url, t.url] }), 'PAYLOAD_TOO_LARGE');
    assert.equal(err.kind, ErrorKind.Request);
    assert.equal(err.reason, 'frame-too-large');
    // the same name within the limit joins: it was the frame's size, not the name
    const room = await t.join({ token: t.token({ roomId: 'r1', grant: {} }), name: 'n'.repeat(256) });
    await room.leave();
  });
});

/**
 * Issue 11, fan-out in slices: through a real relay whose delivery may write almost nothing at
 * once (so nearly every fan-out waits for the delivery's turns, and frames sent at once and
 * frames that waited are mixed), every member still gets its frames in the order the relay
 * sent them: a message targeted at a member after a room-wide one never arrives before it, a
 * response never before a broadcast sent ahead of it, and `joined` comes first.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Delivery } from '../relay/delivery.ts';
import { FrameScheduler } from '../relay/scheduler.ts';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawJoin, type RawClient } from './raw.ts';

const MEMBERS = 40;
const ROUNDS = 60;

describe('issue 11: a fan-out delivered in slices keeps each member\'s frames in order', () => {
  let t: TestRelay;
  before(async () => {
    const frames = new FrameScheduler();
    t = await startTestRelay({ frames, delivery: new Delivery(frames, { directMs: 0.005 }) });
  });
  after(() => t.close());

  it('room-wide messages, messages targeted at one member and answers arrive in the order they were sent', async () => {
    const grant = { canPublishData: true, canSubscribeData: true };
    const members: RawClient[] = [];
    for (let i = 0; i < MEMBERS; i++) {
      const m = await rawJoin(t.url, t.token({ roomId: 'order', participantId: `m${i}`, grant }), { participantId: `m${i}` });
      members.push(m);
      const sub = await m.request('pubsub.subscribe', { topic: 'chat' });
      assert.ok(!sub.error, JSON.stringify(sub));
    }
    const publisher = await rawJoin(t.url, t.token({ roomId: 'order', participantId: 'p', grant }), { participantId: 'p' });
    // each round: one message to the room, then one to a single member, then that member asks something
    for (let round = 0; round < ROUNDS; round++) {
      const target = round % MEMBERS;
      publisher.ws.send(JSON.stringify({ type: 'request', id: 10_000 + 2 * round, method: 'pubsub.publish', params: { topic: 'chat', payload: { round, to: 'all' } } }));
      publisher.ws.send(JSON.stringify({ type: 'request', id: 10_001 + 2 * round, method: 'pubsub.publish', params: { topic: 'chat', payload: { round, to: `m${target}` }, to: [`m${target}`] } }));
    }
    await until(() => members.every((m) => m.frames.filter((f) => f.type === 'event' && f.name === 'pubsub.message').length >= ROUNDS), 20_000, 'every message delivered');
    // a request right behind: its answer comes after everything sent to that member before it
    const pongs = await Promise.all(members.map((m) => m.request('pubsub.history', { topic: 'chat' })));
    for (const p of pongs) assert.ok(!p.error, JSON.stringify(p));

    for (let i = 0; i < MEMBERS; i++) {
      const payloads = members[i]!.frames
        .filter((f) => f.type === 'event' && f.name === 'pubsub.message')
        .map((f) => (f.data as { payload: { round: number; to: string } }).payload);
      const expected: Array<{ round: number; to: string }> = [];
      for (let round = 0; round < ROUNDS; round++) {
        expected.push({ round, to: 'all' });
        if (round % MEMBERS === i) expected.push({ round, to: `m${i}` });
      }
      assert.deepEqual(payloads, expected, `member m${i}`);
    }
    for (const m of [...members, publisher]) m.ws.close();
  });
});

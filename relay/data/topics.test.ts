import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Budget } from '../budget.ts';
import { Timeline } from '../rooms/timeline.ts';
import { ByteArena } from './byte-arena.ts';
import { TopicBoard, type KeptMessage } from './topics.ts';

function board(arena: ByteArena, relay: Budget, perRoom: number): TopicBoard {
  return new TopicBoard(
    { historySize: 1000, maxTopicsPerRoom: 1000, maxSubscriptions: 1000 },
    { history: new Budget(perRoom, relay), store: arena, subscriptions: new Budget(1e9), domainSubscriptions: new Budget(1e9) },
    () => undefined,
    () => false,
    new Timeline(),
  );
}

const record = (seq: number, payloadBytes: number, frameBytes: number): KeptMessage => ({
  seq,
  topic: 't',
  json: JSON.stringify({ id: `m${seq}`, topic: 't', payload: 'x'.repeat(payloadBytes), from: 'a', timestamp: 1 }),
  from: 'a',
  frameBytes,
});

describe('TopicBoard: what another node kept, kept again', () => {
  it('a record understating its frame is charged at least its JSON: the arena stays within 5/4 of the budget', () => {
    const arena = new ByteArena();
    const relay = new Budget(1024 * 1024);
    const topics = board(arena, relay, 1024 * 1024);
    topics.restore(Array.from({ length: 200 }, (_, i) => record(i + 1, 60_000, 10)));
    assert.ok(relay.inUse <= relay.limit);
    assert.ok(arena.bytesInUse <= 1.25 * relay.limit, `arena ${arena.bytesInUse} bytes for a budget of ${relay.limit}`);
  });

  it('nothing is restored into a room that has ended: no blocks or budget that nobody would give back', () => {
    const arena = new ByteArena();
    const relay = new Budget(1e9);
    const topics = board(arena, relay, 1e8);
    topics.dispose();
    topics.restore([record(1, 10_000, 10_100)]);
    assert.equal(arena.bytesInUse, 0);
    assert.equal(relay.inUse, 0);
  });
});

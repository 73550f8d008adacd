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

describe('TopicBoard: what a topic forgets is given back', () => {
  it("a topic's own cap forgetting its oldest, over and over (the room's byte budget never full), leaves no entry a message behind, nor any target list", () => {
    const arena = new ByteArena();
    const relay = new Budget(1e9);
    const topics = new TopicBoard(
      { historySize: 100, maxTopicsPerRoom: 1000, maxSubscriptions: 1000 },
      { history: new Budget(1e8, relay), store: arena, subscriptions: new Budget(1e9), domainSubscriptions: new Budget(1e9) },
      () => undefined,
      () => false,
      new Timeline(),
    );
    const to = Array.from({ length: 300 }, (_, i) => `target-${i}`);
    const inside = topics as unknown as { order: Array<{ gone: boolean; to?: unknown }> };
    let longest = 0;
    for (let round = 0; round < 20; round++) {
      topics.restore(Array.from({ length: 1000 }, (_, i) => ({ ...record(round * 1000 + i + 1, 10, 100), to })));
      longest = Math.max(longest, inside.order.length);
      assert.ok(inside.order.filter((s) => s.gone).every((s) => s.to === undefined), 'a forgotten message keeps no target list');
    }
    // it was one entry a message for ever (20,000 here), each with its 300 targets
    assert.ok(longest <= 2 * 1024 + 100, `the room's list held ${longest} entries for 100 kept messages`);
    const kept = topics.kept();
    assert.equal(kept.length, 100);
    assert.deepEqual(kept.map((m) => m.seq), Array.from({ length: 100 }, (_, i) => 19_901 + i));
    assert.equal(relay.inUse, kept.reduce((sum, m) => sum + Math.max(m.frameBytes, m.json.length) + 64 + to.reduce((n, id) => n + 56 + 2 * id.length, 0), 0));
  });

  it('the room evicting its oldest across topics (its byte budget full) still keeps the newest of each, after the list is compacted', () => {
    const arena = new ByteArena();
    const relay = new Budget(1e9);
    const topics = board(arena, relay, 200 * 1024);
    for (let i = 1; i <= 5000; i++) topics.restore([{ ...record(i, 1000, 1100), topic: `t${i % 7}` }]);
    const kept = topics.kept();
    assert.ok(kept.length > 100 && kept.length < 200, `${kept.length} kept`);
    assert.deepEqual(kept.map((m) => m.seq), Array.from({ length: kept.length }, (_, i) => 5001 - kept.length + i), 'the newest, oldest first');
    assert.ok((topics as unknown as { order: unknown[] }).order.length <= 2 * 1024 + kept.length);
  });
});

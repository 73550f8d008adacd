import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RelayContext } from '../context.ts';
import type { Room } from '../rooms/types.ts';
import type { NodeBus } from './bus.ts';
import { FIELDS_PER_WRITE, RoomRecords } from './room-record.ts';

describe('room records in Redis', () => {
  it(`a room rewritten whole is written in calls of at most ${FIELDS_PER_WRITE} fields (80,000 spread as one call's arguments overflowed the stack and ended the node)`, async () => {
    const calls: string[][] = [];
    const pipeline = {
      tesseraRecord: (...args: unknown[]) => void calls.push(args.map(String)),
      exec: () => Promise.resolve([]),
    };
    const bus = { node: 'n1', redis: { defineCommand: () => undefined, pipeline: () => pipeline } } as unknown as NodeBus;
    const records = new RoomRecords({ seats: { credential: () => null } } as unknown as RelayContext, bus, 60_000);
    const ids = Array.from({ length: 100_000 }, (_, i) => `pinned-${i}`);
    const room = {
      project: 'acme',
      id: 'big',
      opener: 'room',
      members: () => [],
      outputs: { active: () => [] },
      topics: { kept: () => [] },
      pinnedIdentities: () => ids.values(),
    } as unknown as Room;
    records.rewrite(room);
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    // each call: home key, record key, recorded key, node, ttl, number of fields set, 0, entry, then fields
    const written = new Map<string, string>();
    for (const call of calls) {
      const count = Number(call[5]);
      assert.ok(count <= FIELDS_PER_WRITE, `a call of ${count} fields`);
      for (let i = 8; i < 8 + count * 2; i += 2) written.set(call[i]!, call[i + 1]!);
    }
    assert.equal(written.size, ids.length + 1, 'every field written once, the opener with them');
    assert.equal(written.get('opener'), 'room');
    assert.equal(written.get('p:pinned-99999'), '1');
  });
});

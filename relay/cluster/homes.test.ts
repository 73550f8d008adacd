import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RelayContext } from '../context.ts';
import type { NodeBus } from './bus.ts';
import { RoomHomes } from './homes.ts';
import { RoomRecords } from './room-record.ts';

describe('room homes: lease renewal', () => {
  it('a pass over 500 rooms renews their leases in one round trip and their records in one more (two awaited round trips a room outran the 6 s lease on a busy node, and every room went to another node)', async () => {
    const direct: string[] = [];
    const pipelines: number[] = [];
    const redis = {
      defineCommand: () => undefined,
      tesseraRenew: () => (direct.push('tesseraRenew'), Promise.resolve(1)),
      tesseraRenewRecord: () => (direct.push('tesseraRenewRecord'), Promise.resolve(1)),
      pipeline: () => {
        let queued = 0;
        const p = {
          tesseraRenew: () => (queued++, p),
          tesseraRenewRecord: () => (queued++, p),
          exec: () => (pipelines.push(queued), Promise.resolve(Array.from({ length: queued }, () => [null, 1]))),
        };
        return p;
      },
      set: () => Promise.resolve('OK'),
      get: () => Promise.resolve('epoch'),
    };
    const bus = { node: 'n1', redis } as unknown as NodeBus;
    const relay = { bans: {}, rooms: { get: () => ({}) }, log: { warn: () => undefined } } as unknown as RelayContext;
    const records = new RoomRecords({ seats: { credential: () => null } } as unknown as RelayContext, bus, 60_000);
    const homes = new RoomHomes(relay, bus, records, (fn) => fn(), () => undefined);
    try {
      const leases = (homes as unknown as { leases: Map<string, { project: string; roomId: string }> }).leases;
      for (let i = 0; i < 500; i++) leases.set(`acme\u0000r${i}`, { project: 'acme', roomId: `r${i}` });
      const ok = await (homes as unknown as { renewAll(): Promise<boolean> }).renewAll();
      assert.equal(ok, true);
      assert.deepEqual(direct, [], 'no lease or record renewed on its own');
      assert.deepEqual(pipelines, [500, 500], 'the leases in one round trip, the records in another');
    } finally {
      await homes.releaseAll().catch(() => undefined);
    }
  });
});

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

  it('a room this node claims while a renewal pass waits on Redis is not given up (judged by that pass, its new lease looked lost)', async () => {
    const lost: string[] = [];
    const calls: string[] = [];
    const rooms = new Set<string>(['r0']);
    let homes!: RoomHomes;
    const redis = {
      defineCommand: () => undefined,
      tesseraRenew: (key: string) => (calls.push(`renew ${key}`), Promise.resolve(1)),
      tesseraRenewRecord: () => Promise.resolve(1),
      // the lease is this node's already (it claimed it a moment ago): SET NX fails
      tesseraReclaim: (key: string) => (calls.push(`reclaim ${key}`), Promise.resolve(null)),
      tesseraRelease: () => Promise.resolve(1),
      tesseraForgetRoom: () => Promise.resolve(1),
      pipeline: () => {
        let queued = 0;
        const p = {
          tesseraRenew: () => (queued++, p),
          tesseraRenewRecord: () => (queued++, p),
          exec: async () => {
            // meanwhile a first join claims room "new" here (claimOrFind: SET NX OK, then leases.set)
            (homes as unknown as { leases: Map<string, unknown> }).leases.set('acme\u0000new', { project: 'acme', roomId: 'new' });
            rooms.add('new');
            return Array.from({ length: queued }, () => [null, 1]);
          },
        };
        return p;
      },
      set: () => Promise.resolve('OK'),
      get: () => Promise.resolve('epoch'),
      zadd: () => Promise.resolve(1),
    };
    const bus = { node: 'n1', redis } as unknown as NodeBus;
    const relay = { bans: {}, rooms: { get: (_p: string, id: string) => (rooms.has(id) ? {} : undefined) }, log: { warn: () => undefined } } as unknown as RelayContext;
    const records = new RoomRecords({ seats: { credential: () => null } } as unknown as RelayContext, bus, 60_000);
    homes = new RoomHomes(relay, bus, records, (fn) => fn(), (_p, roomId) => void lost.push(roomId));
    try {
      (homes as unknown as { epoch: string }).epoch = 'epoch';
      (homes as unknown as { leases: Map<string, unknown> }).leases.set('acme\u0000r0', { project: 'acme', roomId: 'r0' });
      await (homes as unknown as { renewAll(): Promise<boolean> }).renewAll();
      assert.deepEqual(lost, [], 'a room claimed here during the pass was given up as if another node held it');
    } finally {
      await homes.releaseAll().catch(() => undefined);
    }
  });
});

describe('room homes: claiming a room another node holds', () => {
  /** A node n1 asking for room r, held by n2 until released; n2's heartbeat as `looks` says, look by look. */
  function cluster(looks: boolean[]) {
    const calls: string[] = [];
    let holder: string | null = 'n2';
    const redis = {
      defineCommand: () => undefined,
      set: (_key: string, node: string) => {
        if (holder) return Promise.resolve(null);
        holder = node;
        calls.push(`claimed by ${node}`);
        return Promise.resolve('OK');
      },
      get: () => Promise.resolve(holder),
      tesseraRelease: (_key: string, node: string) => {
        calls.push(`released ${node}`);
        if (holder === node) holder = null;
        return Promise.resolve(1);
      },
      hgetall: () => Promise.resolve({}),
      zadd: () => Promise.resolve(1),
      tesseraForgetRoom: () => Promise.resolve(1),
      tesseraRenew: () => Promise.resolve(1),
    };
    const bus = {
      node: 'n1',
      redis,
      alive: (nodes: string[]) => {
        const up = looks.shift() ?? true;
        calls.push(`looked: ${up ? 'alive' : 'missing'}`);
        return Promise.resolve(new Set(up ? nodes : []));
      },
    } as unknown as NodeBus;
    const relay = { bans: { learn: () => undefined }, rooms: { get: () => undefined }, log: { warn: () => undefined, info: () => undefined } } as unknown as RelayContext;
    const records = new RoomRecords({ seats: { credential: () => null } } as unknown as RelayContext, bus, 60_000);
    return { homes: new RoomHomes(relay, bus, records, (fn) => fn(), () => undefined), calls };
  }

  it('a holder whose heartbeat is missing at one look but back at the next keeps the room (one stall past a heartbeat gave its rooms to the first join that asked)', async () => {
    const { homes, calls } = cluster([false, true]);
    try {
      assert.equal(await homes.of('acme', 'r'), 'n2');
      assert.deepEqual(calls, ['looked: missing', 'looked: alive']);
    } finally {
      await homes.releaseAll().catch(() => undefined);
    }
  });

  it('a holder missing at two looks in a row is dead: its lease is released and the room claimed here', async () => {
    const { homes, calls } = cluster([false, false]);
    try {
      assert.equal(await homes.of('acme', 'r'), 'n1');
      assert.deepEqual(calls, ['looked: missing', 'looked: missing', 'released n2', 'claimed by n1']);
    } finally {
      await homes.releaseAll().catch(() => undefined);
    }
  });
});


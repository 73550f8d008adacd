import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { NodeBus } from './bus.ts';
import { ClusterFiles } from './node-files.ts';

/** Just what ClusterFiles asks of the bus: the nodes' HTTP entries and who is alive. */
function fakeBus(entries: Record<string, string>, alive: Set<string>) {
  const deleted: string[] = [];
  const bus = {
    node: 'me',
    redis: {
      hgetall: async () => ({ ...entries }),
      hdel: async (_key: string, ...nodes: string[]) => {
        for (const node of nodes) {
          delete entries[node];
          deleted.push(node);
        }
        return nodes.length;
      },
    },
    alive: async (nodes: string[]) => new Set(nodes.filter((n) => alive.has(n))),
  } as unknown as NodeBus;
  return { bus, deleted };
}

describe('the nodes a cluster lists for its files', () => {
  it('a node seen dead for a minute has its entry taken out (killed nodes piled up); one that comes back within it keeps it', async () => {
    let now = 1_000_000;
    const entries = { me: 'http://a', killed: 'http://b', stalled: 'http://c', live: 'http://d' };
    const alive = new Set(['live']);
    const { bus, deleted } = fakeBus(entries, alive);
    const files = new ClusterFiles(bus, (err) => assert.fail(String(err)), () => now);
    assert.deepEqual(await files.nodes(), ['http://d']);
    now += 30_000;
    alive.add('stalled'); // its heartbeat is back
    assert.deepEqual((await files.nodes()).sort(), ['http://c', 'http://d']);
    now += 31_000;
    alive.delete('stalled'); // stalled again, just now
    assert.deepEqual(await files.nodes(), ['http://d']);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(deleted, ['killed'], 'the killed node after a minute; the stalled one was seen alive meanwhile');
    assert.deepEqual(Object.keys(entries).sort(), ['live', 'me', 'stalled']);
  });
});

import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { lookupName, NameLookupError, useNameServers } from './name-lookup.ts';

type Behaviour = 'answer' | 'nx' | 'dead';

/**
 * A DNS server on loopback: names starting `answer` get an A record (203.0.113.7) and no AAAA,
 * `nx` names NXDOMAIN, and `dead` names nothing at all (a name server that never answers).
 */
async function nameServer(): Promise<{ socket: Socket; address: string; queries: () => number }> {
  const socket = createSocket('udp4');
  let queries = 0;
  socket.on('message', (query, peer) => {
    queries++;
    let at = 12;
    const labels: string[] = [];
    while (query[at]! > 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]!).toString());
      at += 1 + query[at]!;
    }
    const type = query.readUInt16BE(at + 1);
    const question = query.subarray(12, at + 5);
    const behaviour = (['answer', 'nx', 'dead'] as const).find((b) => labels[0]?.startsWith(b)) ?? 'nx';
    if (behaviour === 'dead') return;
    const answer = behaviour === 'answer' && type === 1 ? Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 203, 0, 113, 7]) : Buffer.alloc(0);
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2);
    header.writeUInt16BE(0x8180 | (behaviour === 'nx' ? 3 : 0), 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answer.length > 0 ? 1 : 0, 6);
    socket.send(Buffer.concat([header, question, answer]), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return { socket, address: `127.0.0.1:${socket.address().port}`, queries: () => queries };
}

describe('names of remote servers, resolved without the thread pool', () => {
  let server: Awaited<ReturnType<typeof nameServer>>;
  let dir = '';
  before(async () => {
    server = await nameServer();
    dir = mkdtempSync(join(tmpdir(), 'tessera-hosts-'));
    writeFileSync(join(dir, 'hosts'), '# a hosts file\n127.0.0.9 only-in-hosts dead-but-listed\n203.0.113.9 answer-overridden # the operator\'s own\n::1 ip6-only-here\n');
    useNameServers([server.address], join(dir, 'hosts'));
  });
  after(() => {
    useNameServers(null);
    server.socket.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('asks the DNS servers: a name with an A record and no AAAA resolves to its address', async () => {
    assert.deepEqual(await lookupName('answer.example'), [{ address: '203.0.113.7', family: 4 }]);
  });

  it('IP literals, the hosts file (before the DNS, whatever the DNS does) and localhost (RFC 6761) are not asked of the DNS', async () => {
    const before = server.queries();
    assert.deepEqual(await lookupName('198.51.100.1'), [{ address: '198.51.100.1', family: 4 }]);
    assert.deepEqual(await lookupName('::1'), [{ address: '::1', family: 6 }]);
    assert.deepEqual(await lookupName('Only-In-Hosts.'), [{ address: '127.0.0.9', family: 4 }]);
    assert.deepEqual(await lookupName('dead-but-listed'), [{ address: '127.0.0.9', family: 4 }], 'a name the DNS would never answer');
    assert.deepEqual(await lookupName('answer-overridden'), [{ address: '203.0.113.9', family: 4 }], "the operator's hosts file first");
    assert.deepEqual(await lookupName('ip6-only-here'), [{ address: '::1', family: 6 }]);
    assert.deepEqual((await lookupName('api.LOCALHOST.')).map((a) => a.address), ['127.0.0.1', '::1']);
    assert.equal(server.queries(), before);
  });

  it("a name server that never answers: the lookup fails (ETIMEOUT) within its deadline however many servers there are, and holds none of the threads other lookups need (one project whose webhook host had a dead name server held up every other project's webhooks)", async () => {
    const others = [await nameServer(), await nameServer()];
    useNameServers([server.address, ...others.map((o) => o.address)], join(dir, 'hosts'));
    try {
      const started = performance.now();
      const dead = Array.from({ length: 8 }, (_, i) => lookupName(`dead-${i}.example`));
      let settled = 0;
      for (const pending of dead) pending.then(() => settled++, () => settled++);
      // the thread pool's name lookups (the system's hosts file) are answered while all eight wait
      assert.ok((await lookup('localhost', { all: true })).length > 0);
      assert.equal(settled, 0, 'the dead lookups still wait');
      for (const pending of dead) await assert.rejects(pending, (err: unknown) => err instanceof NameLookupError && err.code === 'ETIMEOUT');
      // three servers of 1.5 s each would be 4.5 s; the deadline is 5 s (a generous bound for a loaded machine)
      assert.ok(performance.now() - started < 15_000, 'not a query per try per server without end');
    } finally {
      useNameServers([server.address], join(dir, 'hosts'));
      for (const o of others) o.socket.close();
    }
  });

  it("a name the DNS does not know goes on to the system's resolver (search domains, its hosts file), which NXDOMAIN lets it ask at once", async (t) => {
    const name = readFileSync('/etc/hosts', 'utf8')
      .split('\n')
      .map((line) => line.replace(/#.*/, '').trim().split(/\s+/))
      .flatMap(([address, ...names]) => (address && /^127\./.test(address) ? names : []))
      .find((n) => n && !n.includes('localhost') && !n.startsWith('nx') && !n.startsWith('answer') && !n.startsWith('dead'));
    if (!name) return t.skip('no loopback name besides localhost in /etc/hosts');
    // not in the relay's hosts file of this test, and NXDOMAIN at the fake server: the system's /etc/hosts has it
    assert.ok((await lookupName(name)).some((a) => a.address.startsWith('127.')), name);
  });
});

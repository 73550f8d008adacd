import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { amfDecode, amfEncode, ChunkReader, MessageType, type Amf } from '../relay/outputs/rtmp-wire.ts';
import type { Room } from '../src/room.ts';
import { rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { acceptHandshake, command, commandBytes, header0, readExactly, setChunkSize, startRtmpListener, startTcpServer } from './rtmp-listener.ts';

const LIVE = { canLivestream: true } as const;
const DEADLINE = 1500;

/** Keep a relay's uncaught errors instead of dying of them: the test then says what happened. */
function watchProcess(): { problems: unknown[]; stop(): void } {
  const problems: unknown[] = [];
  const note = (e: unknown) => problems.push(e);
  process.on('uncaughtException', note);
  process.on('unhandledRejection', note);
  return {
    problems,
    stop: () => {
      process.off('uncaughtException', note);
      process.off('unhandledRejection', note);
    },
  };
}

/** What every failure to reach an RTMP server looks like to the caller: one code, one reason, one message. */
async function rtmpFailure(room: Room, url: string): Promise<{ code: string; reason?: string; message: string }> {
  const err = await rejectsWith(room.livestream.start({ url }), 'CONNECTION_FAILED');
  return { code: err.code, reason: err.reason, message: err.message };
}

describe('RTMP client against hostile servers', { timeout: 60_000 }, () => {
  let t: TestRelay;
  let steady: Room;
  let watch: ReturnType<typeof watchProcess>;
  let counter = 0;

  before(async () => {
    watch = watchProcess();
    // requests as fast as the test makes them: the subject is the RTMP client, not the rate limits
    t = await startTestRelay({ allowPrivateRtmp: true, outputStartTimeoutMs: DEADLINE, messageBurst: 100_000, messageRate: 100_000, frameRate: 1_000_000 });
    steady = await t.join({ token: t.token({ roomId: 'steady', participantId: 'steady', grant: { canPublishData: true } }) });
  });
  after(async () => {
    await t.close();
    watch.stop();
  });

  /** The relay is alive: the steady room answers and a new room opens. */
  const alive = async () => {
    await steady.pubsub.publish('chat', 'still here');
    const fresh = await t.join({ token: t.token({ roomId: `fresh-${++counter}`, grant: {} }) });
    await fresh.leave();
    assert.deepEqual(watch.problems, [], 'no uncaught exception or rejection');
  };
  const host = (roomId: string) => t.join({ token: t.token({ roomId, participantId: 'host', grant: LIVE }) });

  it('item 3: a hostile RTMP server that sends garbage does not crash the relay; livestream fails', async () => {
    const deep = Buffer.concat([...Array.from({ length: 10_000 }, () => Buffer.from([0x0a, 0, 0, 0, 1])), Buffer.from([0x05])]);
    const scripts: Record<string, (s: Socket) => Promise<void> | void> = {
      'garbage instead of a handshake': (s) => void s.end(randomBytes(4096)),
      'a short handshake, then close': (s) => void s.end(randomBytes(100)),
      'a megabyte of garbage after the handshake': async (s) => {
        await acceptHandshake(s);
        for (let i = 0; i < 16; i++) s.write(randomBytes(64 * 1024));
        s.end();
      },
      'Set Chunk Size 0': async (s) => {
        await acceptHandshake(s);
        s.end(Buffer.concat([setChunkSize(0), command(['_result', 1, null, { code: 'NetConnection.Connect.Success' }])]));
      },
      'Set Chunk Size 2^31': async (s) => {
        await acceptHandshake(s);
        s.end(Buffer.concat([setChunkSize(2 ** 31), command(['_result', 1, null, {}])]));
      },
      'a message of 16 MiB': async (s) => {
        await acceptHandshake(s);
        s.write(header0(3, MessageType.Command, 0xffffff));
        for (let i = 0; i < 16; i++) s.write(Buffer.alloc(64 * 1024, 0x41));
        s.end();
      },
      'a type 3 chunk on a chunk stream never opened': async (s) => {
        await acceptHandshake(s);
        s.end(Buffer.concat([Buffer.from([0xc9]), randomBytes(200)]));
      },
      'a type 1 header first': async (s) => {
        await acceptHandshake(s);
        s.end(Buffer.from([0x45, 0, 0, 0, 0, 0, 10, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]));
      },
      'an AMF0 string longer than its message': async (s) => {
        await acceptHandshake(s);
        s.end(commandBytes(Buffer.from([0x02, 0xff, 0xff, 0x41])));
      },
      'an AMF0 long string of 4 GiB': async (s) => {
        await acceptHandshake(s);
        s.end(commandBytes(Buffer.from([0x0c, 0xff, 0xff, 0xff, 0xff, 0x41])));
      },
      'an AMF0 array of 2^32-1 elements': async (s) => {
        await acceptHandshake(s);
        s.end(commandBytes(Buffer.concat([amfEncode(['_result', 1]), Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff])])));
      },
      'AMF0 arrays nested 10,000 deep': async (s) => {
        await acceptHandshake(s);
        s.end(commandBytes(Buffer.concat([amfEncode(['_result', 1]), deep])));
      },
      'an unknown AMF0 type': async (s) => {
        await acceptHandshake(s);
        s.end(commandBytes(Buffer.concat([amfEncode(['_result', 1]), Buffer.from([0x11, 1, 2, 3])])));
      },
      'connect refused with a chatty _error': async (s) => {
        await acceptHandshake(s);
        await readExactly(s, 16);
        s.end(command(['_error', 1, null, { code: 'NetConnection.Connect.Rejected', description: 'port 6379 is redis <script>' }]));
      },
      'a server that floods valid messages and never answers': async (s) => {
        await acceptHandshake(s);
        const ack = Buffer.concat([header0(2, MessageType.Ack, 4), Buffer.alloc(4)]);
        for (let i = 0; i < 200; i++) s.write(Buffer.concat(Array.from({ length: 500 }, () => ack)));
        s.end();
      },
    };
    const messages = new Set<string>();
    for (const [name, script] of Object.entries(scripts)) {
      const server = await startTcpServer(script);
      const a = await host(`hostile-${++counter}`);
      try {
        const err = await rtmpFailure(a, `rtmp://127.0.0.1:${server.port}/live/key`);
        assert.equal(err.reason, 'rtmp-failed', name);
        messages.add(err.message);
        assert.equal(a.livestream.state, 'failed', name);
        assert.doesNotMatch(err.message, /redis|script|6379|\d{4,}/, `${name}: nothing the server said, no port`);
        await alive();
      } finally {
        server.close();
        await a.leave();
      }
    }
    assert.equal(messages.size, 1, 'one message for every failure');
  });

  it('item 3: extended timestamps and three-byte chunk stream ids are read correctly', async () => {
    // a server that writes its answers on chunk stream 320 (basic header form 1) with extended timestamps
    const answer = (values: Amf[], streamId = 0) => {
      const payload = amfEncode(values);
      const h = Buffer.alloc(3 + 11 + 4);
      h[0] = 1; // csid in the next two bytes
      h.writeUInt16LE(320 - 64, 1);
      h.writeUIntBE(0xffffff, 3, 3);
      h.writeUIntBE(payload.length, 6, 3);
      h[9] = MessageType.Command;
      h.writeUInt32LE(streamId, 10);
      h.writeUInt32BE(0x12345678, 14);
      return Buffer.concat([h, payload]);
    };
    const server = await startTcpServer(async (s) => {
      await acceptHandshake(s);
      const reader = new ChunkReader((m) => {
        if (m.typeId !== MessageType.Command) return;
        const [name, txn] = amfDecode(m.payload);
        if (name === 'connect') s.write(answer(['_result', txn, null, { code: 'NetConnection.Connect.Success' }]));
        else if (name === 'createStream') s.write(answer(['_result', txn, null, 1]));
        else if (name === 'publish') s.write(answer(['onStatus', 0, null, { code: 'NetStream.Publish.Start' }], 1));
      });
      s.on('data', (d: Buffer) => reader.push(d));
      s.resume();
    });
    const a = await host('extended');
    try {
      const status = await a.livestream.start({ url: `rtmp://127.0.0.1:${server.port}/live/key` });
      assert.equal(status.state, 'active');
      await a.livestream.stop();
    } finally {
      server.close();
      await a.leave();
    }
  });

  it('item 3: generated hostile replies (fast-check): every start settles, the relay lives', async () => {
    // a generated server: a handshake (real or generated), then as a real server would answer
    // `answered` of connect and createStream, then the generated fragments, then the end
    let current: { handshake: Buffer | null; answered: number; fragments: Buffer[] } = { handshake: null, answered: 0, fragments: [] };
    const server = await startTcpServer(async (s) => {
      const run = current;
      const hostile = () => {
        for (const f of run.fragments) s.write(f);
        s.end();
      };
      if (run.handshake) return hostile();
      await acceptHandshake(s);
      if (run.answered === 0) return hostile();
      let answers = 0;
      const reader = new ChunkReader((m) => {
        if (m.typeId !== MessageType.Command || answers >= run.answered) return;
        const [name, txn] = amfDecode(m.payload);
        if (name !== 'connect' && name !== 'createStream') return;
        s.write(command(['_result', txn, null, name === 'connect' ? { code: 'NetConnection.Connect.Success' } : 1]));
        if (++answers === run.answered) hostile();
      });
      s.on('data', (d: Buffer) => reader.push(d));
      s.resume();
    });
    const chunk = fc
      .record({
        fmt: fc.integer({ min: 0, max: 3 }),
        csid: fc.integer({ min: 0, max: 63 }),
        ts: fc.oneof(fc.constant(0xffffff), fc.nat(0xffffff)),
        length: fc.oneof(fc.nat(300), fc.constant(0xffffff), fc.nat(0xffffff)),
        typeId: fc.constantFrom(0, 1, 2, 3, 4, 5, 6, 18, 20, 255),
        body: fc.uint8Array({ maxLength: 300 }),
      })
      .map(({ fmt, csid, ts, length, typeId, body }) => {
        const h = header0(csid, typeId, length, ts);
        h[0] = (fmt << 6) | csid;
        return Buffer.concat([h.subarray(0, 1 + [11, 7, 3, 0][fmt]!), ts === 0xffffff ? Buffer.from([0, 0, 0, 1]) : Buffer.alloc(0), body]);
      });
    const amfValue: fc.Arbitrary<Amf> = fc.letrec<{ v: Amf }>((tie) => ({
      v: fc.oneof({ depthSize: 'small' }, fc.double(), fc.boolean(), fc.string(), fc.constant(null), fc.array(tie('v'), { maxLength: 4 }), fc.dictionary(fc.string(), tie('v'), { maxKeys: 4 })),
    })).v;
    const mutatedCommand = fc
      .tuple(fc.constantFrom('_result', '_error', 'onStatus'), fc.integer({ min: 0, max: 6 }), fc.array(amfValue, { maxLength: 3 }), fc.nat(), fc.nat(255), fc.boolean())
      .map(([name, txn, rest, at, byte, cut]) => {
        const payload = Buffer.from(amfEncode([name, txn, ...rest]));
        if (cut) return commandBytes(payload.subarray(0, at % (payload.length + 1)));
        payload[at % payload.length] = byte;
        return commandBytes(payload);
      });
    const fragment = fc.oneof(fc.uint8Array({ maxLength: 512 }).map((u) => Buffer.from(u)), chunk, mutatedCommand, fc.nat().map((n) => setChunkSize(n)));
    const scenario = fc.record({
      handshake: fc.option(fc.uint8Array({ maxLength: 3200 }).map((u) => Buffer.from(u)), { freq: 4 }),
      answered: fc.integer({ min: 0, max: 2 }),
      fragments: fc.array(fragment, { maxLength: 12 }),
    });
    const a = await host('fuzzed');
    let runs = 0;
    /** One generated server: the start settles within the deadline, as a failure (or, by chance, a success). */
    const attempt = async (run: typeof current) => {
      runs++;
      current = run;
      const started = Date.now();
      try {
        await a.livestream.start({ url: `rtmp://127.0.0.1:${server.port}/live/key` });
        await a.livestream.stop(); // a generated server that happens to speak RTMP
      } catch (err) {
        const e = err as { code?: string; reason?: string };
        assert.ok((e.code === 'CONNECTION_FAILED' && e.reason === 'rtmp-failed') || (e.code === 'TIMEOUT' && e.reason === 'start-timeout'), `${e.code} ${e.reason}`);
        assert.equal(a.livestream.state, 'failed');
      }
      assert.ok(Date.now() - started < DEADLINE + 1000, 'settled within the deadline');
      await steady.pubsub.publish('chat', 'alive');
      assert.deepEqual(watch.problems, []);
    };
    try {
      await fc.assert(
        fc.asyncProperty(scenario, attempt),
        { numRuns: 3000, interruptAfterTimeLimit: 4000, markInterruptAsFailure: false },
      );
      assert.ok(runs >= 100, `only ${runs} runs`);
      await alive();
    } finally {
      server.close();
      await a.leave();
    }
  });
});

describe('item 3: a silent RTMP server: start settles within the deadline, output failed, stop works', { timeout: 30_000 }, () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ allowPrivateRtmp: true, outputStartTimeoutMs: 500 });
  });
  after(() => t.close());

  for (const [name, script] of [
    ['silent from the start', (s: Socket) => void s.resume()],
    ['silent after the handshake', (s: Socket) => void acceptHandshake(s).then(() => s.resume(), () => {})],
  ] as const) {
    it(`item 3: a silent RTMP server (${name}): start settles within the deadline, output failed, stop works`, async () => {
      const server = await startTcpServer(script);
      const a = await t.join({ token: t.token({ roomId: `silent-${name}`, participantId: 'host', grant: LIVE }) });
      const url = `rtmp://127.0.0.1:${server.port}/live/key`;
      try {
        const began = Date.now();
        const err = await rejectsWith(a.livestream.start({ url }), 'TIMEOUT');
        assert.equal(err.reason, 'start-timeout');
        assert.ok(Date.now() - began < 1500, `settled after ${Date.now() - began} ms`);
        assert.equal(a.livestream.state, 'failed');
        await until(() => server.closed() === 1, 2000, 'the provider closed its connection');

        // stop while starting cancels the start
        const starting = a.livestream.start({ url });
        const refused = rejectsWith(starting, 'INVALID_STATE');
        await until(() => a.livestream.state === 'starting', 2000, 'starting');
        const stopped = await a.livestream.stop();
        assert.equal(stopped.state, 'stopped');
        assert.equal((await refused).reason, 'output-stopped');
        await until(() => a.livestream.state === 'stopped');
        await until(() => server.closed() === 2, 2000, 'the cancelled start closed its connection');
      } finally {
        server.close();
        await a.leave();
      }
    });
  }
});

describe('item 21: livestream targets', { timeout: 30_000 }, () => {
  it('item 21: loopback/private/metadata targets refused without --allow-private-rtmp', async () => {
    const t = await startTestRelay();
    const rtmp = await startRtmpListener();
    const p = rtmp.port;
    const a = await t.join({ token: t.token({ roomId: 'targets', participantId: 'host', grant: LIVE }) });
    try {
      const hosts = [
        `127.0.0.1:${p}`, `localhost:${p}`, `127.1:${p}`, `2130706433:${p}`, `0x7f000001:${p}`, `[::1]:${p}`, `[::ffff:127.0.0.1]:${p}`, `[::ffff:7f00:1]:${p}`,
        '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '100.64.0.1', '169.254.169.254', '0.0.0.0', '224.0.0.1', '255.255.255.255',
        '[fd00::1]', '[fc00::1]', '[fe80::1]', '[::]', '[ff02::1]', '[::ffff:10.0.0.1]', '[::ffff:169.254.169.254]', '[64:ff9b::a9fe:a9fe]',
      ];
      for (const h of hosts) {
        const err = await rejectsWith(a.livestream.start({ url: `rtmp://${h}/live/key` }), 'INVALID_ARGUMENT');
        assert.equal(err.reason, 'private-target', h);
        assert.equal(a.livestream.state, 'failed');
      }
      const tls = await rejectsWith(a.livestream.start({ url: `rtmps://127.0.0.1:${p}/live/key` }), 'INVALID_ARGUMENT');
      assert.equal(tls.reason, 'private-target');
      assert.equal(rtmp.sessions.length, 0, 'no connection was made');
    } finally {
      rtmp.close();
      await a.leave();
      await t.close();
    }
  });

  it('item 21: closed port and open-but-not-RTMP port give the same error', async () => {
    const t = await startTestRelay({ allowPrivateRtmp: true, outputStartTimeoutMs: 3000 });
    const closedPort = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });
    const http = createHttpServer((_req, res) => res.end('hello'));
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
    const servers = [
      await startTcpServer((s) => void s.end()),
      await startTcpServer((s) => void s.resetAndDestroy()),
      await startTcpServer((s) => void s.end('SSH-2.0-OpenSSH_9.6\r\n')),
      await startTcpServer((s) => void s.end(randomBytes(5000))),
    ];
    const a = await t.join({ token: t.token({ roomId: 'ports', participantId: 'host', grant: LIVE }) });
    try {
      const ports = [closedPort, (http.address() as { port: number }).port, ...servers.map((s) => s.port)];
      const errors = [];
      for (const port of ports) errors.push(await rtmpFailure(a, `rtmp://127.0.0.1:${port}/live/key`));
      for (const e of errors) assert.deepEqual(e, errors[0]);
      assert.equal(errors[0]!.reason, 'rtmp-failed');
      assert.doesNotMatch(errors[0]!.message, /ECONN|refused|reset|\d{3,}/i);
      const tls = await rtmpFailure(a, `rtmps://127.0.0.1:${(http.address() as { port: number }).port}/live/key`);
      assert.deepEqual(tls, errors[0], 'rtmps fails alike');
    } finally {
      for (const s of servers) s.close();
      http.close();
      await a.leave();
      await t.close();
    }
  });
});

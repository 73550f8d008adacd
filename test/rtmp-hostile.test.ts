import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { runningFfmpeg } from '../relay/outputs/ffmpeg/process.ts';
import type { Room } from '../src/room.ts';
import { rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { acceptHandshake, amf0, command, commandBytes, header0, MessageType, readExactly, setChunkSize, startTcpServer } from './rtmp-scripts.ts';

const LIVE = { canLivestream: true } as const;
/** The board's start deadline in these tests: the provider gives up a little before it. */
const DEADLINE = 4000;
const SMALL = { width: 320, height: 180, fps: 10, videoKbps: 200 };

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

describe('livestream (ffmpeg) against hostile RTMP servers', { timeout: 180_000 }, () => {
  let t: TestRelay;
  let steady: Room;
  let watch: ReturnType<typeof watchProcess>;
  let counter = 0;

  before(async () => {
    watch = watchProcess();
    // the fuzz starts one room's livestream once a case: past 20 cases the default of 20 starts a
    // minute would answer RATE_LIMITED, whatever the server sent
    t = await startTestRelay({ allowPrivateRtmp: true, outputStarts: 1_000_000, outputStartTimeoutMs: DEADLINE, composite: SMALL });
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

  it('item 3: a hostile RTMP server that sends garbage does not crash the relay; livestream fails (rtmp-failed) within the deadline', async () => {
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
      'an AMF0 string longer than its message': async (s) => {
        await acceptHandshake(s);
        s.end(commandBytes(Buffer.from([0x02, 0xff, 0xff, 0x41])));
      },
      'an AMF0 array of 2^32-1 elements': async (s) => {
        await acceptHandshake(s);
        s.end(commandBytes(Buffer.concat([amf0(['_result', 1]), Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff])])));
      },
      'AMF0 arrays nested 10,000 deep': async (s) => {
        await acceptHandshake(s);
        const deep = Buffer.concat([...Array.from({ length: 10_000 }, () => Buffer.from([0x0a, 0, 0, 0, 1])), Buffer.from([0x05])]);
        s.end(commandBytes(Buffer.concat([amf0(['_result', 1]), deep])));
      },
      'connect refused with a chatty _error': async (s) => {
        await acceptHandshake(s);
        await readExactly(s, 16);
        s.end(command(['_error', 1, null, { code: 'NetConnection.Connect.Rejected', description: 'port 6379 is redis <script>' }]));
      },
      'publish refused with onStatus': async (s) => {
        await acceptHandshake(s);
        s.write(command(['_result', 1, null, { code: 'NetConnection.Connect.Success' }]));
        s.write(command(['_result', 4, null, 1]));
        s.write(command(['onStatus', 0, null, { level: 'error', code: 'NetStream.Publish.BadName', description: 'port 6379 is redis' }], 1));
        s.resume();
      },
      'a server that floods valid messages and never answers': async (s) => {
        await acceptHandshake(s);
        const ack = Buffer.concat([header0(2, MessageType.Ack, 4), Buffer.alloc(4)]);
        s.resume();
        for (let i = 0; i < 200 && !s.destroyed; i++) s.write(Buffer.concat(Array.from({ length: 500 }, () => ack)));
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
    await until(() => runningFfmpeg() === 0, 10_000, 'no ffmpeg left');
  });

  it('item 3: generated hostile replies (fast-check): every start settles within the deadline, the relay lives', async () => {
    // a real handshake and a successful connect, then the generated fragments, then the end
    let fragments: Buffer[] = [];
    const server = await startTcpServer(async (s) => {
      const mine = fragments;
      await acceptHandshake(s);
      s.write(command(['_result', 1, null, { code: 'NetConnection.Connect.Success' }]));
      for (const f of mine) s.write(f);
      s.end();
    });
    const chunk = fc
      .record({ fmt: fc.integer({ min: 0, max: 3 }), csid: fc.integer({ min: 0, max: 63 }), length: fc.oneof(fc.nat(300), fc.constant(0xffffff)), typeId: fc.constantFrom(0, 1, 2, 3, 4, 5, 6, 8, 9, 18, 20, 255), body: fc.uint8Array({ maxLength: 300 }) })
      .map(({ fmt, csid, length, typeId, body }) => {
        const h = header0(csid, typeId, length);
        h[0] = (fmt << 6) | csid;
        return Buffer.concat([h.subarray(0, 1 + [11, 7, 3, 0][fmt]!), body]);
      });
    const fragment = fc.oneof(fc.uint8Array({ maxLength: 512 }).map((u) => Buffer.from(u)), chunk, fc.nat().map((n) => setChunkSize(n)));
    const a = await host('fuzzed');
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(fragment, { maxLength: 12 }), async (generated) => {
          fragments = generated;
          const started = Date.now();
          try {
            await a.livestream.start({ url: `rtmp://127.0.0.1:${server.port}/live/key` });
            await a.livestream.stop(); // a generated server that happens to take the stream
          } catch (err) {
            const e = err as { code?: string; reason?: string };
            assert.ok(e.code === 'CONNECTION_FAILED' && e.reason === 'rtmp-failed', `${e.code} ${e.reason}`);
            assert.equal(a.livestream.state, 'failed');
          }
          assert.ok(Date.now() - started < DEADLINE, `settled after ${Date.now() - started} ms`);
          await steady.pubsub.publish('chat', 'alive');
          assert.deepEqual(watch.problems, []);
        }),
        { numRuns: 12 },
      );
      await alive();
    } finally {
      server.close();
      await a.leave();
    }
  });

  for (const [name, script] of [
    ['silent from the start', (s: Socket) => void s.resume()],
    ['silent after the handshake', (s: Socket) => void acceptHandshake(s).then(() => s.resume(), () => {})],
  ] as const) {
    it(`item 3: a silent RTMP server (${name}): start fails (rtmp-failed) within the deadline, stop works while starting`, async () => {
      const server = await startTcpServer(script);
      const a = await host(`silent-${++counter}`);
      const url = `rtmp://127.0.0.1:${server.port}/live/key`;
      try {
        const began = Date.now();
        const err = await rejectsWith(a.livestream.start({ url }), 'CONNECTION_FAILED');
        assert.equal(err.reason, 'rtmp-failed');
        assert.ok(Date.now() - began < DEADLINE, `settled after ${Date.now() - began} ms`);
        assert.equal(a.livestream.state, 'failed');
        await until(() => server.closed() === 1, 5000, 'ffmpeg closed its connection');

        // stop while starting cancels the start
        const refused = rejectsWith(a.livestream.start({ url }), 'INVALID_STATE');
        await until(() => server.sockets.length === 2, 5000, 'connected again');
        const stopped = await a.livestream.stop();
        assert.equal(stopped.state, 'stopped');
        assert.equal((await refused).reason, 'output-stopped');
        await until(() => server.closed() === 2, 5000, 'the cancelled start closed its connection');
        await until(() => runningFfmpeg() === 0, 10_000, 'no ffmpeg left');
      } finally {
        server.close();
        await a.leave();
      }
    });
  }
});

describe('item 21: livestream targets', { timeout: 60_000 }, () => {
  it('item 21: loopback/private/metadata targets refused without --allow-private-rtmp', async () => {
    // 26 targets refused in one room: more starts than a room gets a minute by default
    const t = await startTestRelay({ outputStarts: 100 });
    const listener = await startTcpServer((s) => void s.resume());
    const p = listener.port;
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
        assert.equal(a.livestream.state, 'stopped');
      }
      const tls = await rejectsWith(a.livestream.start({ url: `rtmps://127.0.0.1:${p}/live/key` }), 'INVALID_ARGUMENT');
      assert.equal(tls.reason, 'private-target');
      assert.equal(listener.sockets.length, 0, 'no connection was made');
      assert.equal(runningFfmpeg(), 0, 'no ffmpeg was started');
    } finally {
      listener.close();
      await a.leave();
      await t.close();
    }
  });

  it('item 21: closed port and open-but-not-RTMP port give the same error', async () => {
    const t = await startTestRelay({ allowPrivateRtmp: true, outputStartTimeoutMs: DEADLINE, composite: SMALL });
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

/**
 * Client processes of the hostile benchmark (`bench/hostile.ts`), raw `ws` sockets only:
 *
 * - `audience`: the normal room's 1,000 viewers (one shared domain-wide viewer token, each
 *   subscribed to `chat`), plus the two victims of the aimed floods (`victim-fast` reads
 *   normally, `victim-slow` reads half a second out of every second and a half, like a bad
 *   mobile link). Counts what they receive and whether any of them is ever disconnected.
 * - `hostile`: every flood of issue 11's "memory and fairness" list, at full rate (as fast as
 *   the relay takes the bytes), each hostile client reconnecting whenever it is cut off.
 *
 * Every loop is bounded in count and by the deadline the parent gives.
 */
import { connect as tcpConnect, type Socket } from 'node:net';
import { WebSocket, type RawData } from 'ws';
import { mintToken } from '../src/server/mint.ts';

const [mode, url] = process.argv.slice(2) as [string, string];
const SECRET = process.env.BENCH_SECRET!;
const ROOM = process.env.BENCH_ROOM ?? 'normal';
const KiB = 1024;
const MiB = 1024 * KiB;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const send = (msg: unknown) => process.send!(msg);
const mint = (claims: Record<string, unknown>) => mintToken({ apiKey: 'bench', secret: SECRET, grant: {}, ...claims } as Parameters<typeof mintToken>[0]);
/** An all-zero mask: ws then skips masking, so the hostile side pays almost nothing per byte (the relay still unmasks). */
const zeroMask = (mask: Buffer) => void mask.fill(0);
const rawLength = (data: RawData) => (Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data instanceof ArrayBuffer ? data.byteLength : data.length);
const asBuffer = (data: RawData) => (Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data));
const socketOf = (ws: WebSocket) => (ws as unknown as { _socket: Socket })._socket;

/** Open a socket and join; resolves with the socket once `joined` came, or with the refusal. */
function rawJoin(frame: Record<string, unknown>, timeoutMs = 15_000): Promise<{ ws: WebSocket } | { refused: string }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, generateMask: zeroMask });
    let settled = false;
    const done = (v: { ws: WebSocket } | { refused: string }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if ('refused' in v) ws.terminate();
      resolve(v);
    };
    const timer = setTimeout(() => done({ refused: 'timeout' }), timeoutMs);
    ws.on('error', (err) => done({ refused: /503/.test(err.message) ? 'http-503' : 'socket-error' }));
    ws.once('close', (code) => done({ refused: `closed-${code}` }));
    ws.once('open', () => ws.send(JSON.stringify({ type: 'join', v: 1, ...frame })));
    ws.once('message', (data) => {
      const text = String(data);
      if (text.startsWith('{"type":"joined"')) return done({ ws });
      const code = /"code":"([A-Z_]+)"/.exec(text)?.[1] ?? 'unexpected-frame';
      const reason = /"reason":"([a-z-]+)"/.exec(text)?.[1];
      done({ refused: reason ? `${code}/${reason}` : code });
    });
  });
}

// ---- audience --------------------------------------------------------------------------

interface AudienceCounts {
  chat: number;
  frames: number;
  bytes: number;
  /** CPU time of this process since the last count, microseconds. */
  cpu: number;
  closed: number;
  closeCodes: Record<string, number>;
  victims: Record<string, { chat: number; aimed: number; bytes: number; stream: number; cuts: number; open: boolean }>;
  /** The chat's delay at every viewer (see {@link Delays}): p50, p99, max (ms), and how many. */
  delay: { p50: number; p99: number; max: number; n: number };
}

/**
 * The chat's delay from the speaker's publish to each of the 1,000 viewers, in 0.1 ms bins: the
 * whole room's distribution, where the probes are only the first members of its fan-out. The
 * chat carries the publish time on the machine's clock (`performance.timeOrigin + now()`,
 * comparable across processes here to well under a millisecond).
 */
class Delays {
  private static readonly BIN_MS = 0.1;
  private bins = new Uint32Array(100_000); // up to 10 s; later in the last bin
  private n = 0;
  private max = 0;

  add(ms: number): void {
    const i = Math.min(this.bins.length - 1, Math.max(0, Math.floor(ms / Delays.BIN_MS)));
    this.bins[i]!++;
    this.n++;
    if (ms > this.max) this.max = ms;
  }

  private percentile(p: number): number {
    const want = Math.ceil((p / 100) * this.n);
    let seen = 0;
    for (let i = 0; i < this.bins.length; i++) {
      seen += this.bins[i]!;
      if (seen >= want) return (i + 1) * Delays.BIN_MS;
    }
    return this.max;
  }

  /** Its summary, and a fresh start. */
  take(): AudienceCounts['delay'] {
    const out = this.n ? { p50: this.percentile(50), p99: this.percentile(99), max: this.max, n: this.n } : { p50: 0, p99: 0, max: 0, n: 0 };
    this.bins.fill(0);
    this.n = 0;
    this.max = 0;
    return out;
  }
}

async function audience(): Promise<void> {
  const viewers = Number(process.env.BENCH_VIEWERS ?? 1000);
  const audienceToken = mint({ isViewer: true, grant: { canSubscribe: true } });
  const counts: AudienceCounts = { chat: 0, frames: 0, bytes: 0, cpu: 0, closed: 0, closeCodes: {}, victims: {}, delay: { p50: 0, p99: 0, max: 0, n: 0 } };
  const delays = new Delays();
  const WALL = Buffer.from('"wall":');
  let cpuMark = process.cpuUsage();
  let leaving = false;
  const sockets: WebSocket[] = [];
  const watch = (ws: WebSocket, onText: (data: Buffer) => void) => {
    ws.on('message', (data, isBinary) => {
      counts.frames++;
      counts.bytes += rawLength(data);
      if (!isBinary) onText(asBuffer(data));
    });
    ws.on('close', (code) => {
      if (leaving) return;
      counts.closed++;
      counts.closeCodes[code] = (counts.closeCodes[code] ?? 0) + 1;
    });
    ws.on('error', () => {});
    sockets.push(ws);
  };
  const isChat = (b: Buffer) => b.length < 4096 && b.includes('"name":"pubsub.message"');
  let failed = 0;
  let next = 0;
  const joinOne = async (i: number) => {
    const r = await rawJoin({ token: audienceToken, participantId: `viewer-${i}`, roomId: ROOM }, 60_000);
    if (!('ws' in r)) return void failed++;
    watch(r.ws, (b) => {
      if (!isChat(b)) return;
      counts.chat++;
      const at = b.indexOf(WALL);
      if (at >= 0) delays.add(performance.timeOrigin + performance.now() - parseFloat(b.toString('latin1', at + WALL.length, at + WALL.length + 24)));
    });
    r.ws.send(JSON.stringify({ type: 'request', id: 1, method: 'pubsub.subscribe', params: { topic: 'chat' } }));
  };
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < viewers) await joinOne(next++);
    }),
  );
  // the victims of the aimed floods: normal members with pinned identities; one that is cut
  // off comes back a second later (every cut counts as a normal member disconnected)
  const victimLoops: Array<Promise<void>> = [];
  const victim = async (id: string) => {
    const v = (counts.victims[id] = { chat: 0, aimed: 0, bytes: 0, stream: 0, cuts: 0, open: false as boolean });
    const token = mint({ roomId: ROOM, participantId: id, isViewer: true, grant: { canSubscribe: true } });
    for (let attempt = 0; !leaving && attempt < 1000; attempt++) {
      const r = await rawJoin({ token, participantId: id });
      if (!('ws' in r)) {
        await sleep(1000);
        continue;
      }
      v.open = true;
      const closed = new Promise<void>((resolve) =>
        r.ws.on('close', () => {
          v.open = false;
          if (!leaving) v.cuts++;
          resolve();
        }),
      );
      r.ws.on('message', (data, isBinary) => {
        const n = rawLength(data);
        v.bytes += n;
        if (isBinary) return void (v.stream += n);
        const b = asBuffer(data);
        if (n > 16 * KiB) {
          if (b.subarray(0, 64).includes('"pubsub.message"')) v.aimed++;
        } else if (isChat(b)) v.chat++;
      });
      watch(r.ws, () => {});
      r.ws.send(JSON.stringify({ type: 'request', id: 1, method: 'pubsub.subscribe', params: { topic: 'chat' } }));
      if (id === 'victim-slow') {
        // a bad link: reads 500 ms, then nothing for 1 s
        const socket = socketOf(r.ws);
        for (let k = 0; !leaving && v.open && k < 100_000; k++) {
          await sleep(500);
          socket.pause();
          await sleep(1000);
          socket.resume();
        }
      }
      await closed;
      if (!leaving) await sleep(1000);
    }
  };
  for (const id of ['victim-fast', 'victim-slow']) {
    victimLoops.push(victim(id));
    for (let t = 0; t < 500 && !counts.victims[id]!.open; t++) await sleep(20);
    if (!counts.victims[id]!.open) failed++;
  }
  process.on('message', (msg: { cmd: string }) => {
    if (msg.cmd === 'counts') {
      const used = process.cpuUsage(cpuMark);
      cpuMark = process.cpuUsage();
      counts.cpu = used.user + used.system;
      counts.delay = delays.take();
      send({ counts: structuredClone(counts) });
      counts.chat = 0;
      counts.frames = 0;
      counts.bytes = 0;
      counts.closed = 0;
      counts.closeCodes = {};
      for (const v of Object.values(counts.victims)) {
        v.chat = 0;
        v.aimed = 0;
        v.bytes = 0;
        v.stream = 0;
        v.cuts = 0;
      }
    }
    if (msg.cmd === 'close') {
      leaving = true;
      for (const ws of sockets) ws.close();
      setTimeout(() => process.exit(0), 1000).unref();
      void Promise.all(victimLoops).then(() => setTimeout(() => process.exit(0), 300));
    }
  });
  send({ ready: true, joined: sockets.length, failed });
}

// ---- hostile ---------------------------------------------------------------------------

/** What one flood did, as its clients saw it. */
interface FloodStats {
  /** Sockets it opened (joined, or held before the join). */
  connections: number;
  frames: number;
  bytes: number;
  /** Times the relay closed one of its sockets while the flood ran. */
  cutOffs: number;
  closeCodes: Record<string, number>;
  /** Joins (or upgrades) refused, by code or reason. */
  refused: Record<string, number>;
  /** Answers of interest, by what they said. */
  answers: Record<string, number>;
  /** Bytes received (for the stream reader). */
  received: number;
}

const floods = new Map<string, FloodStats>();
function stats(name: string): FloodStats {
  let s = floods.get(name);
  if (!s) floods.set(name, (s = { connections: 0, frames: 0, bytes: 0, cutOffs: 0, closeCodes: {}, refused: {}, answers: {}, received: 0 }));
  return s;
}
const bump = (rec: Record<string, number>, key: string, n = 1) => void (rec[key] = (rec[key] ?? 0) + n);

let running = false;
let deadline = 0;
const live = () => running && Date.now() < deadline;
/** Most (re)connections any one hostile client makes in a run. */
const MAX_ATTEMPTS = 200_000;

/**
 * A hostile client: join, run, and when the relay cuts it off, count that and come back
 * (`retryMs` after a refused join). `run` resolves when it is done or the socket closed.
 */
async function hostileClient(name: string, join: (attempt: number) => Record<string, unknown>, run: (ws: WebSocket, done: () => boolean, s: FloodStats) => Promise<void>, retryMs = 50): Promise<void> {
  const s = stats(name);
  for (let attempt = 0; live() && attempt < MAX_ATTEMPTS; attempt++) {
    const r = await rawJoin(join(attempt));
    if (!('ws' in r)) {
      bump(s.refused, r.refused);
      await sleep(retryMs);
      continue;
    }
    const { ws } = r;
    s.connections++;
    let closed = false;
    ws.on('error', () => {});
    ws.once('close', (code) => {
      closed = true;
      if (!live()) return;
      s.cutOffs++;
      bump(s.closeCodes, String(code));
    });
    await run(ws, () => closed || !live(), s);
    if (!closed) {
      // ours, not a cut-off: ended by the deadline
      ws.removeAllListeners('close');
      ws.terminate();
    }
    await sleep(5);
  }
}

/** Send frames as fast as the socket takes them, never holding more than `high` bytes unsent here. */
async function pump(ws: WebSocket, done: () => boolean, s: FloodStats, frame: (i: number) => string | Buffer, high = MiB, binary = false): Promise<void> {
  let i = 0;
  while (!done()) {
    if (ws.bufferedAmount >= high) {
      await sleep(1);
      continue;
    }
    for (let b = 0; b < 32 && !done() && ws.bufferedAmount < high; b++) {
      const f = frame(i++);
      ws.send(f, { binary });
      s.frames++;
      s.bytes += f.length;
    }
    await new Promise((r) => setImmediate(r));
  }
}

/** Wait until `done()` (the socket closed, or the run is over). */
async function hold(done: () => boolean, everyMs = 100): Promise<void> {
  while (!done()) await sleep(everyMs);
}

/**
 * Read nothing for 35 s at a time (longer than two heartbeats: the relay must let go of it),
 * then look: a paused socket never sees its own close, so it reads for a moment to find out.
 */
async function stall(ws: WebSocket, done: () => boolean): Promise<void> {
  const socket = socketOf(ws);
  for (let round = 0; !done() && round < 1000; round++) {
    socket.pause();
    for (let t = 0; t < 350 && !done(); t++) await sleep(100);
    socket.resume();
    for (let t = 0; t < 10 && !done(); t++) await sleep(100);
  }
}

/** Count answers whose (small) text contains one of `marks`. */
function countAnswers(ws: WebSocket, s: FloodStats, marks: string[]): void {
  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    const b = asBuffer(data);
    if (b.length > 4096) return; // room traffic (shapes, aimed messages), not an answer
    for (const m of marks) if (b.includes(m)) return bump(s.answers, m);
  });
}

const request = (method: string, params: unknown, id = 1) => JSON.stringify({ type: 'request', id, method, params });
/** A pubsub payload of just under the 64 KiB payload limit (its JSON is 65,000 bytes). */
const BIG = 'x'.repeat(64_998);
/** A persisted 64 KiB publish to topic `h<k>`, built by concatenation (cheap for the hostile side). */
const persisted = (k: number) => Buffer.from(`{"type":"request","id":${k},"method":"pubsub.publish","params":{"topic":"h${k}","persist":true,"payload":"${BIG}"}}`);

/** The scale of the floods (`BENCH_*` env to change). */
const N = {
  preauth: Number(process.env.BENCH_PREAUTH ?? 1000),
  roomOpeners: Number(process.env.BENCH_ROOM_OPENERS ?? 110),
  topicViewers: Number(process.env.BENCH_TOPIC_VIEWERS ?? 20),
  cursors: Number(process.env.BENCH_CURSORS ?? 10),
  churners: Number(process.env.BENCH_CHURNERS ?? 4),
  presence: Number(process.env.BENCH_PRESENCE ?? 4),
  aimed: Number(process.env.BENCH_AIMED ?? 2),
};
const only = process.env.BENCH_FLOODS ? new Set(process.env.BENCH_FLOODS.split(',')) : null;
const enabled = (name: string) => !only || only.has(name);

function floodsToRun(): Array<Promise<void>> {
  const all: Array<Promise<void>> = [];
  const chatToken = (room = ROOM) => mint({ roomId: room, grant: { canPublishData: true } });
  const viewerToken = (grant: Record<string, boolean> = {}) => mint({ roomId: ROOM, isViewer: true, grant });
  const id = (name: string, i: number, attempt: number) => `${name}-${i}-${attempt}`;

  // item 5: a chat token persisting 64 KiB payloads across 2,000 topics
  if (enabled('history')) {
    const token = chatToken();
    all.push(
      hostileClient('history', (a) => ({ token, participantId: id('history', 0, a) }), async (ws, done, s) => {
        countAnswers(ws, s, ['"result"', 'RATE_LIMITED', 'PAYLOAD_TOO_LARGE']);
        let topic = 0;
        await pump(ws, done, s, () => persisted(topic++ % 2000));
      }),
    );
  }

  // item 10 (rooms): domain-wide chat tokens opening more rooms than their project's quota; each
  // room that opens is then filled with persisted history (the relay-wide history ceiling)
  if (enabled('rooms')) {
    const token = mint({ grant: { canPublishData: true } });
    const frames = Array.from({ length: 80 }, (_, k) => persisted(k));
    for (let i = 0; i < N.roomOpeners; i++) {
      all.push(
        hostileClient('rooms', (a) => ({ token, participantId: id('opener', i, a), roomId: `dom-${i}` }), async (ws, done, s) => {
          let refusals = 0;
          ws.on('message', (data) => {
            const b = asBuffer(data);
            if (b.includes('"result"')) bump(s.answers, 'history kept');
            else if (b.includes('"error"')) {
              refusals++;
              bump(s.answers, /"reason":"([a-z-]+)"/.exec(String(b))?.[1] ?? 'error');
            }
          });
          // 80 × 64 KiB (more than the room's 4 MiB), paced by the answers: the relay's byte rate decides
          for (let k = 0; k < 80 && !done() && refusals < 40; k++) {
            while (!done() && ws.bufferedAmount > 256 * KiB) await sleep(5);
            ws.send(frames[k]!, { binary: false });
            s.frames++;
            s.bytes += frames[k]!.length;
            await sleep(40);
          }
          await hold(done);
        }, 50),
      );
    }
  }

  // item 6: an empty-grant viewer asking for the whole board in a loop, beside a canWhiteboard member drawing at full speed
  if (enabled('board')) {
    const token = mint({ roomId: ROOM, grant: { canWhiteboard: true } });
    const stroke = { kind: 'stroke', points: Array.from({ length: 4000 }, (_, i) => 1000 + ((i * 7919) % 8999) + 0.25) };
    const draw = Buffer.from(request('whiteboard.draw', { shape: stroke }));
    let lastClear = 0;
    all.push(
      hostileClient('board', (a) => ({ token, participantId: id('drawer', 0, a) }), async (ws, done, s) => {
        ws.send(request('output.start', { output: 'whiteboard' }, 0));
        ws.on('message', (data) => {
          const b = asBuffer(data);
          if (b.length > 4096) {
            // its own shape comes back twice: the answer, and the broadcast to the room
            if (b.subarray(0, 64).includes('"type":"response"')) bump(s.answers, 'drawn');
            return;
          }
          if (b.includes('board-full')) {
            bump(s.answers, 'board-full');
            // a full board is cleared at most every 5 s: full most of the time, refilled (and broadcast) now and then
            if (Date.now() - lastClear > 5000) {
              lastClear = Date.now();
              ws.send(request('whiteboard.clear', {}, 2));
              bump(s.answers, 'cleared');
            }
          } else if (b.includes('RATE_LIMITED')) bump(s.answers, 'RATE_LIMITED');
        });
        await pump(ws, done, s, () => draw);
      }),
    );
    const viewer = viewerToken();
    all.push(
      hostileClient('shapes', (a) => ({ token: viewer, participantId: id('shapes', 0, a) }), async (ws, done, s) => {
        ws.on('message', (data) => {
          const n = rawLength(data);
          s.received += n;
          if (n > 64 * KiB) bump(s.answers, 'whole board');
          else if (asBuffer(data).includes('RATE_LIMITED')) bump(s.answers, 'RATE_LIMITED');
        });
        const ask = Buffer.from(request('whiteboard.shapes', {}));
        await pump(ws, done, s, () => ask);
      }),
    );
  }

  // item 7: pings and requests far over the frame budget
  if (enabled('frames')) {
    const token = viewerToken();
    const ping = Buffer.from('{"type":"ping"}');
    const list = Buffer.from(request('participants.list', { tier: 'viewer', limit: 100 }));
    all.push(
      hostileClient('frames', (a) => ({ token, participantId: id('frames', 0, a) }), async (ws, done, s) => {
        countAnswers(ws, s, ['"pong"', '"participants"']);
        await pump(ws, done, s, (i) => (i % 2 ? ping : list), 256 * KiB);
      }),
    );
  }

  // item 12: oversized frames, just under 4× the frame limit (the largest the relay reads to answer)
  if (enabled('oversize')) {
    const token = chatToken();
    const frame = Buffer.from(request('pubsub.publish', { topic: 'big', payload: 'z'.repeat(4 * 256 * KiB - 2 * KiB) }));
    all.push(
      hostileClient('oversize', (a) => ({ token, participantId: id('oversize', 0, a) }), async (ws, done, s) => {
        countAnswers(ws, s, ['PAYLOAD_TOO_LARGE']);
        await pump(ws, done, s, () => frame, 2 * MiB);
      }),
    );
  }

  // item 8: 64 KiB `to: [victims]` at two normal members and a member of the room that never
  // reads (`aimed`); a non-reading member in a room-wide data stream, another room (`streams`);
  // a data stream aimed at the victims (`aimed-stream`)
  if (enabled('aimed')) {
    const token = chatToken();
    const frame = Buffer.from(request('pubsub.publish', { topic: 'chat', payload: BIG, to: ['victim-fast', 'victim-slow'] }));
    for (let i = 0; i < N.aimed; i++) {
      all.push(
        hostileClient('aimed', (a) => ({ token, participantId: id('aimed', i, a) }), async (ws, done, s) => {
          countAnswers(ws, s, ['"recipients":2', '"recipients":1', '"recipients":0', 'RATE_LIMITED']);
          await pump(ws, done, s, () => frame);
        }),
      );
    }
    const stuckToken = viewerToken({ canSubscribe: true });
    all.push(
      hostileClient('non-reader', (a) => ({ token: stuckToken, participantId: id('stuck', 0, a) }), async (ws, done, s) => {
        ws.send(request('pubsub.subscribe', { topic: 'chat' }));
        s.frames++;
        await sleep(100);
        await stall(ws, done);
      }),
    );
  }
  if (enabled('streams')) all.push(...streamFlood());
  // the same aim through a data stream: chunks as fast as the relay reads them, ignoring stream.ack
  if (enabled('aimed-stream')) {
    const streamToken = chatToken();
    const payload = Buffer.alloc(64 * KiB, 9);
    all.push(
      hostileClient('aimed-stream', (a) => ({ token: streamToken, participantId: id('aimed-stream', 0, a) }), async (ws, done, s) => {
        let opened: number | null = null;
        ws.on('message', (data, isBinary) => {
          if (isBinary) return;
          const m = /^\{"type":"response","id":9,"result":\{"streamId":(\d+)/.exec(String(data));
          if (m) opened = Number(m[1]);
          else if (asBuffer(data).includes('"id":9,"error"')) bump(s.answers, 'open refused');
        });
        for (let n = 0; !done() && n < 10_000; n++) {
          opened = null;
          ws.send(request('stream.open', { size: 64 * MiB, kind: 'bytes', to: ['victim-fast', 'victim-slow'] }, 9));
          for (let t = 0; !done() && opened === null && t < 200; t++) await sleep(10);
          if (opened === null) continue;
          const streamId: number = opened;
          bump(s.answers, 'streams opened');
          let seq = 0;
          await pump(ws, () => done() || seq >= 1024, s, () => {
            const header = Buffer.alloc(9);
            header[0] = 1;
            header.writeUInt32BE(streamId, 1);
            header.writeUInt32BE(seq++, 5);
            return Buffer.concat([header, payload]);
          }, MiB, true);
          if (!done()) ws.send(request('stream.close', { streamId }, 10));
        }
      }),
    );
  }

  // item 9: sockets that never authenticate, each holding a partial frame just inside the
  // pre-auth budget, and one socket pushing pre-auth bytes (pings) past it at full rate
  if (enabled('preauth')) {
    for (let i = 0; i < N.preauth; i++) all.push(preauthHolder(i));
    all.push(preauthPusher());
  }

  // item 10 (topics): empty-grant viewers subscribing to ever new topics, at full rate
  if (enabled('topics')) {
    const token = viewerToken();
    for (let i = 0; i < N.topicViewers; i++) {
      all.push(
        hostileClient('topics', (a) => ({ token, participantId: id('topics', i, a) }), async (ws, done, s) => {
          countAnswers(ws, s, ['too-many-subscriptions', 'subscriptions-full', 'too-many-topics', '"result"']);
          const frame = (k: number) =>
            k % 2 === 0
              ? `{"type":"request","id":1,"method":"pubsub.subscribe","params":{"topic":"s${i}-${k >> 1}"}}`
              : `{"type":"request","id":1,"method":"pubsub.unsubscribe","params":{"topic":"s${i}-${(k >> 1) - 100}"}}`;
          await pump(ws, done, s, frame, 256 * KiB);
        }),
      );
    }
  }

  // item 11: idle participants.list cursors while viewers join and leave at full rate
  if (enabled('cursors')) {
    const token = viewerToken();
    for (let i = 0; i < N.cursors; i++) {
      all.push(
        hostileClient('cursors', (a) => ({ token, participantId: id('cursor', i, a) }), async (ws, done, s) => {
          let cursor: string | null = null;
          ws.on('message', (data) => {
            const m = /"nextCursor":"([^"]+)"/.exec(String(data));
            if (m) {
              cursor = m[1]!;
              bump(s.answers, 'page');
            }
          });
          ws.send(request('participants.list', { tier: 'viewer', limit: 1 }));
          s.frames++;
          // idle; every 20 s the old cursor is used once
          for (let t = 0; !done() && t < 100_000; t++) {
            await sleep(100);
            if (t % 200 === 199 && cursor) {
              ws.send(request('participants.list', { tier: 'viewer', limit: 1, cursor }));
              s.frames++;
            }
          }
        }),
      );
    }
    const audienceToken = mint({ isViewer: true, grant: { canSubscribe: true } });
    for (let i = 0; i < N.churners; i++) {
      all.push(
        (async () => {
          const s = stats('churn');
          for (let a = 0; live() && a < MAX_ATTEMPTS; a++) {
            const r = await rawJoin({ token: audienceToken, participantId: `churn-${i}-${a}`, roomId: ROOM });
            if (!('ws' in r)) {
              bump(s.refused, r.refused);
              await sleep(50);
              continue;
            }
            s.connections++;
            s.frames++;
            r.ws.on('error', () => {});
            r.ws.close();
            await new Promise((res) => r.ws.once('close', res));
          }
        })(),
      );
    }
  }
  // a speaker-tier token with no grant, joining the normal room and leaving at once, over and
  // over: each arrival and departure is an event to every member
  if (enabled('presence')) {
    const token = mint({ roomId: ROOM, grant: {} });
    for (let i = 0; i < N.presence; i++) {
      all.push(
        (async () => {
          const s = stats('presence');
          for (let a = 0; live() && a < MAX_ATTEMPTS; a++) {
            const r = await rawJoin({ token, participantId: `presence-${i}-${a}` });
            if (!('ws' in r)) {
              bump(s.refused, r.refused);
              await sleep(50);
              continue;
            }
            s.connections++;
            s.frames += 2;
            r.ws.on('error', () => {});
            r.ws.send(request('session.leave', {}));
            r.ws.close();
            await new Promise((res) => r.ws.once('close', res));
          }
        })(),
      );
    }
  }
  return all;
}

/** Room `streams`: a sender streaming room-wide without pause, a member reading it, one never reading. */
function streamFlood(): Array<Promise<void>> {
  const room = 'streams';
  const sender = mint({ roomId: room, grant: { canPublishData: true } });
  const member = mint({ roomId: room, grant: {} });
  const SIZE = 64 * MiB;
  const chunkPayload = Buffer.alloc(64 * KiB, 7);
  const out: Array<Promise<void>> = [];
  out.push(
    hostileClient('stream-reader', (a) => ({ token: member, participantId: `reader-${a}` }), async (ws, done, s) => {
      ws.on('message', (data, isBinary) => {
        if (isBinary) s.received += rawLength(data) - 9;
        else if (asBuffer(data).includes('"stream.abort"')) bump(s.answers, 'stream.abort');
      });
      await hold(done);
    }),
  );
  out.push(
    hostileClient('stream-stuck', (a) => ({ token: member, participantId: `stuck-${a}` }), async (ws, done) => {
      await stall(ws, done);
    }),
  );
  out.push(
    hostileClient('stream', (a) => ({ token: sender, participantId: `sender-${a}` }), async (ws, done, s) => {
      let opened: { streamId: number; chunkBytes: number; window: number } | null = null;
      let acked = -1;
      let waiter: (() => void) | null = null;
      ws.on('message', (data, isBinary) => {
        if (isBinary) return;
        const f = JSON.parse(String(data)) as { type: string; id?: number; name?: string; result?: typeof opened; data?: { streamId: number; seq: number } };
        if (f.type === 'response' && f.id === 7 && f.result) opened = f.result;
        // an honest sender: acknowledgements of this stream only
        if (f.name === 'stream.ack' && opened && f.data!.streamId === opened.streamId) acked = f.data!.seq;
        waiter?.();
      });
      const wait = (ms: number) =>
        new Promise<void>((r) => {
          waiter = r;
          setTimeout(r, ms);
        });
      for (let n = 0; !done() && n < 10_000; n++) {
        opened = null;
        acked = -1;
        ws.send(request('stream.open', { size: SIZE, kind: 'bytes' }, 7));
        for (let t = 0; !done() && !opened && t < 100; t++) await wait(50);
        if (!opened) continue;
        const { streamId, chunkBytes, window } = opened as { streamId: number; chunkBytes: number; window: number };
        const chunks = Math.ceil(SIZE / chunkBytes);
        for (let seq = 0; seq < chunks && !done(); seq++) {
          for (let t = 0; !done() && seq - acked > window && t < 2000; t++) await wait(5);
          const header = Buffer.alloc(9);
          header[0] = 1;
          header.writeUInt32BE(streamId, 1);
          header.writeUInt32BE(seq, 5);
          ws.send(Buffer.concat([header, chunkPayload.subarray(0, Math.min(chunkBytes, SIZE - seq * chunkBytes))]));
          s.frames++;
          s.bytes += chunkBytes;
        }
        if (!done()) ws.send(request('stream.close', { streamId }, 8));
        bump(s.answers, 'streams sent');
      }
    }),
  );
  return out;
}

const port = Number(new URL(url).port);
const UPGRADE = `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${Buffer.alloc(16, 3).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`;
/** A masked text frame header announcing 16,000 bytes (inside the 16 KiB join-frame limit), and 15,000 of them. */
const PARTIAL = Buffer.concat([Buffer.from([0x81, 0xfe, 16_000 >> 8, 16_000 & 0xff, 0, 0, 0, 0]), Buffer.alloc(15_000, 0x78)]);

/** One socket that upgrades, sends most of a frame, and holds it until the relay lets it go; then again. */
async function preauthHolder(i: number): Promise<void> {
  const s = stats('preauth');
  await sleep(i * 2); // 1,000 sockets over two seconds
  for (let attempt = 0; live() && attempt < MAX_ATTEMPTS; attempt++) {
    const outcome = await new Promise<string>((resolve) => {
      const socket = tcpConnect(port, '127.0.0.1');
      let state: 'upgrading' | 'holding' = 'upgrading';
      let seen = '';
      const stopTimer = setInterval(() => {
        if (!live()) {
          socket.destroy();
          resolve('ours');
        }
      }, 200);
      const end = (why: string) => {
        clearInterval(stopTimer);
        socket.destroy();
        resolve(why);
      };
      socket.on('error', () => end(state === 'holding' ? 'cut' : 'refused'));
      socket.on('close', () => end(state === 'holding' ? 'cut' : 'refused'));
      socket.on('data', (chunk) => {
        if (state === 'holding') return end('closed-by-relay');
        seen += chunk.toString('latin1');
        if (seen.startsWith('HTTP/1.1 503')) return end('http-503');
        if (seen.includes('\r\n\r\n')) {
          if (!seen.startsWith('HTTP/1.1 101')) return end('refused');
          state = 'holding';
          s.connections++;
          socket.write(PARTIAL);
          s.frames++;
          s.bytes += PARTIAL.length;
        }
      });
      socket.write(UPGRADE);
    });
    if (outcome === 'ours') return;
    if (outcome === 'closed-by-relay' || outcome === 'cut') {
      s.cutOffs++;
      bump(s.closeCodes, outcome === 'cut' ? 'socket closed' : 'join timeout (error + close frame)');
    } else bump(s.refused, outcome);
    await sleep(100);
  }
}

/** A socket that sends pings before any join, as fast as it can: the pre-auth byte budget must cut it. */
async function preauthPusher(): Promise<void> {
  const s = stats('preauth-pusher');
  const ping = Buffer.alloc(125, 1);
  for (let attempt = 0; live() && attempt < MAX_ATTEMPTS; attempt++) {
    const ws = new WebSocket(url, { perMessageDeflate: false, generateMask: zeroMask });
    const outcome = await new Promise<string>((resolve) => {
      ws.on('error', (err) => resolve(/503/.test(err.message) ? 'http-503' : 'error'));
      ws.on('close', (code) => resolve(`closed-${code}`));
      ws.once('open', async () => {
        s.connections++;
        // at most 1 MiB of pings per socket (the budget is 17 KiB), then up to 3 s for the relay to read them
        for (let k = 0; k < 8192 && ws.readyState === ws.OPEN && live(); k++) {
          for (let t = 0; t < 1000 && ws.bufferedAmount > 64 * KiB && ws.readyState === ws.OPEN; t++) await sleep(1);
          if (ws.readyState !== ws.OPEN) break;
          ws.ping(ping);
          s.frames++;
          s.bytes += 131;
        }
        for (let t = 0; t < 300 && ws.readyState === ws.OPEN && live(); t++) await sleep(10);
        if (ws.readyState === ws.OPEN) {
          ws.terminate();
          resolve(live() ? 'not cut after 1 MiB' : 'ours');
        }
      });
    });
    if (outcome === 'ours') return;
    if (outcome.startsWith('closed-') || outcome === 'not cut after 1 MiB') {
      s.cutOffs++;
      bump(s.closeCodes, outcome === 'closed-1006' ? '1006 (terminated)' : outcome);
    } else bump(s.refused, outcome);
    await sleep(20);
  }
}

async function hostile(): Promise<void> {
  let all: Array<Promise<void>> = [];
  let cpuAtGo = process.cpuUsage();
  process.on('message', async (msg: { cmd: string; seconds?: number }) => {
    if (msg.cmd === 'go') {
      cpuAtGo = process.cpuUsage();
      running = true;
      deadline = Date.now() + msg.seconds! * 1000;
      all = floodsToRun();
      send({ started: true, clients: all.length });
    }
    if (msg.cmd === 'stop') {
      running = false;
      // every client notices within its own polling interval; none waits longer than 15 s
      await Promise.race([Promise.all(all), sleep(15_000)]);
      send({ stopped: true, floods: Object.fromEntries(floods), cpu: process.cpuUsage(cpuAtGo) });
    }
    if (msg.cmd === 'close') setTimeout(() => process.exit(0), 200);
  });
  send({ ready: true });
}

if (mode === 'audience') await audience();
else await hostile();

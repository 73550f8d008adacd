/**
 * `npm run bench:flood`: pubsub latency of well-behaved clients, quiet and while one client
 * floods the relay at full speed (reconnecting whenever it is cut off), with the relay's
 * default limits. Target: p99 under the flood ≤ 2× the quiet p99.
 */
import { WebSocket } from 'ws';
import { mintToken } from '../src/server/mint.ts';
import { Sdk } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import { ms, summary, table } from './lib.ts';
import { child, message, stop } from './procs.ts';

const SECRET = 'bench-secret-0123456789';
const PHASE_MS = 6000;
const relay = child('server-child.ts', ['relay'], { BENCH_SECRET: SECRET, BENCH_RELAY_CONFIG: JSON.stringify({}) });
const { url } = await message<{ url: string }>(relay);
const token = (id: string) => mintToken({ apiKey: 'bench', secret: SECRET, roomId: 'flood', participantId: id, grant: { canPublishData: true } });

const publisher = await Sdk.join({ url, token: token('publisher') });
const subscribers: Room[] = [];
const latencies: number[] = [];
let recording = false;
for (let i = 0; i < 9; i++) {
  const r = await Sdk.join({ url, token: token(`sub-${i}`) });
  await r.pubsub.subscribe('calm', ({ payload }) => recording && latencies.push(performance.now() - (payload as { at: number }).at));
  subscribers.push(r);
}

async function phase(flooding: boolean): Promise<{ p50: number; p99: number; floodFrames: number; cutOffs: number }> {
  latencies.length = 0;
  let floodFrames = 0;
  let cutOffs = 0;
  let on = flooding;
  const flooder = (async () => {
    while (on) {
      const ws = new WebSocket(url);
      ws.on('error', () => {});
      await new Promise<void>((resolve) => ws.once('open', () => resolve()));
      ws.send(JSON.stringify({ type: 'join', v: 1, token: token(`flooder-${cutOffs}`), participantId: `flooder-${cutOffs}` }));
      let open = true;
      ws.once('close', () => (open = false));
      let id = 0;
      while (on && open) {
        // as fast as the socket takes it: publishes to everyone in the room
        ws.send(JSON.stringify({ type: 'request', id: id++, method: 'pubsub.publish', params: { topic: 'calm', payload: { at: 0, flood: true } } }));
        floodFrames++;
        if (ws.bufferedAmount > 1024 * 1024 || id % 100 === 0) await new Promise((r) => setImmediate(r));
      }
      if (on) cutOffs++;
      ws.terminate();
    }
  })();
  await new Promise((r) => setTimeout(r, 500));
  recording = true;
  const end = Date.now() + PHASE_MS;
  while (Date.now() < end) {
    await publisher.pubsub.publish('calm', { at: performance.now() });
    await new Promise((r) => setTimeout(r, 20));
  }
  recording = false;
  on = false;
  await flooder;
  const s = summary(latencies.filter((l) => l >= 0 && l < 1e6));
  return { p50: s.p50, p99: s.p99, floodFrames, cutOffs };
}

const quiet = await phase(false);
const flood = await phase(true);
console.log(`# Flood benchmark — ${new Date().toISOString()}\n`);
console.log(
  table(
    ['measure', 'quiet', 'one client flooding', 'ratio', 'target'],
    [
      ['pubsub delivery to 9 subscribers, p50', ms(quiet.p50), ms(flood.p50), `${(flood.p50 / quiet.p50).toFixed(2)}×`, ''],
      ['pubsub delivery to 9 subscribers, p99', ms(quiet.p99), ms(flood.p99), `${(flood.p99 / quiet.p99).toFixed(2)}×`, '≤ 2×'],
      ['flood frames sent / times the flooder was cut off (4011) and came back', '', `${flood.floodFrames.toLocaleString('en-US')} / ${flood.cutOffs}`, '', ''],
    ],
  ),
);
for (const r of [publisher, ...subscribers]) void r.leave();
await stop(relay);
process.exit(0);

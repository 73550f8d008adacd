/**
 * `npm run bench:flood`: pubsub latency of well-behaved clients, quiet and while one client
 * floods the relay at full speed (reconnecting whenever it is cut off), with the relay's
 * default limits. Target: p99 under the flood ≤ 2× the quiet p99.
 */
import { mintToken } from '../src/server/mint.ts';
import { Sdk } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import { ms, summary, table } from './lib.ts';
import { ask, child, message, stop } from './procs.ts';

const SECRET = 'bench-secret-0123456789';
const PHASE_MS = 6000;
const relay = child('server-child.ts', ['relay'], { BENCH_SECRET: SECRET, BENCH_RELAY_CONFIG: JSON.stringify({}) });
const { url } = await message<{ url: string }>(relay);
const flooder = child('flood-worker.ts', []);
await message(flooder);
const token = (id: string) => mintToken({ apiKey: 'bench', secret: SECRET, roomId: 'flood', participantId: id, grant: { canPublishData: true } });

const publisher = await Sdk.join({ url, token: token('publisher') });
const subscribers: Room[] = [];
const latencies: number[] = [];
let recording = false;
let floodDelivered = 0;
for (let i = 0; i < 9; i++) {
  const r = await Sdk.join({ url, token: token(`sub-${i}`) });
  // the flood's own messages reach the subscribers too (within the flooder's budgets): counted, not timed
  await r.pubsub.subscribe('calm', ({ payload }) => {
    if (!recording) return;
    if ((payload as { flood?: boolean }).flood) floodDelivered++;
    else latencies.push(performance.now() - (payload as { at: number }).at);
  });
  subscribers.push(r);
}

async function phase(flooding: boolean): Promise<{ p50: number; p99: number; floodFrames: number; cutOffs: number; delivered: number }> {
  latencies.length = 0;
  floodDelivered = 0;
  // the flooder is a process of its own (bench/flood-worker.ts): a client elsewhere, not one that takes the measuring clients' event loop
  if (flooding) flooder.send({ cmd: 'go', url, tokens: Array.from({ length: 100 }, (_, n) => token(`flooder-${n}`)) });
  await new Promise((r) => setTimeout(r, 500));
  recording = true;
  const end = Date.now() + PHASE_MS;
  while (Date.now() < end) {
    await publisher.pubsub.publish('calm', { at: performance.now() });
    await new Promise((r) => setTimeout(r, 20));
  }
  recording = false;
  const sent = flooding ? await ask<{ floodFrames: number; cutOffs: number }>(flooder, { cmd: 'halt' }) : { floodFrames: 0, cutOffs: 0 };
  const s = summary(latencies.filter((l) => l >= 0 && l < 1e6));
  return { p50: s.p50, p99: s.p99, ...sent, delivered: floodDelivered };
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
      ['flood messages the 9 subscribers received (the flooder\'s budgets let through)', '', flood.delivered.toLocaleString('en-US'), '', ''],
    ],
  ),
);
for (const r of [publisher, ...subscribers]) void r.leave();
await stop(flooder);
await stop(relay);
process.exit(0);

/**
 * A subscriber process of the data benchmark: `count` connections that record when each
 * message arrives — SDK pubsub subscribers (`sdk`) or raw ws sockets (`raw`).
 */
import { WebSocket } from 'ws';
import { Sdk } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import './lib.ts';

const [mode, url, countText] = process.argv.slice(2);
const count = Number(countText);
const token = process.env.BENCH_TOKEN ?? '';
const now = () => performance.timeOrigin + performance.now();
/** Per message (by sentAt): receive times. */
const latencies: number[] = [];
let lastArrival = 0;
let arrivals = 0;
const closers: Array<() => void> = [];

function record(sentAt: number): void {
  const at = now();
  latencies.push(at - sentAt);
  lastArrival = Math.max(lastArrival, at);
  arrivals++;
}

async function connect(): Promise<void> {
  const pending: Array<Promise<void>> = [];
  for (let i = 0; i < count; i++) {
    pending.push(
      (async () => {
        if (mode === 'sdk') {
          const room: Room = await Sdk.join({ url: url!, token, roomId: 'data', timeoutMs: 60_000 });
          await room.pubsub.subscribe('bench', (m) => record((m.payload as { sentAt: number }).sentAt));
          closers.push(() => void room.leave());
        } else {
          const ws = new WebSocket(url!, { perMessageDeflate: false });
          await new Promise<void>((resolve, reject) => {
            ws.once('open', () => resolve());
            ws.once('error', reject);
          });
          ws.on('message', (data, isBinary) => {
            if (!isBinary) record((JSON.parse(String(data)) as { sentAt: number }).sentAt);
          });
          closers.push(() => ws.close());
        }
      })(),
    );
    if (pending.length >= 64) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
}

process.on('message', async (msg: { cmd: string }) => {
  if (msg.cmd === 'report') {
    process.send!({ report: true, latencies, lastArrival, arrivals });
    latencies.length = 0;
    arrivals = 0;
    lastArrival = 0;
  }
  if (msg.cmd === 'close') {
    for (const c of closers) c();
    setTimeout(() => process.exit(0), 300);
  }
});
await connect();
process.send!({ ready: true });

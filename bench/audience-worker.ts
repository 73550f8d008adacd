/**
 * A client process of the audience benchmark: opens `count` connections with bounded
 * concurrency — SDK joins (`sdk`) or raw ws connect + 300-byte message + reply (`raw`) — keeps
 * them open, reports, and closes them when told.
 */
import { WebSocket } from 'ws';
import { Sdk } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import './lib.ts';

const [mode, url, countText, concurrencyText] = process.argv.slice(2);
const count = Number(countText);
const concurrency = Number(concurrencyText);
const token = process.env.BENCH_TOKEN ?? '';
const room = process.env.BENCH_ROOM ?? 'audience';
const payload = JSON.stringify({ type: 'join', v: 1, token, participantId: 'x', roomId: room }).padEnd(300, ' ');
const open: Array<{ close(): void }> = [];

async function one(): Promise<void> {
  if (mode === 'sdk') {
    const r: Room = await Sdk.join({ url: url!, token, roomId: room, timeoutMs: 60_000 });
    open.push({ close: () => void r.leave() });
    return;
  }
  const ws = new WebSocket(url!, { perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => ws.send(payload));
    ws.once('message', () => resolve());
    ws.once('error', reject);
  });
  open.push({ close: () => ws.close() });
}

process.on('message', async (msg: { cmd: string }) => {
  if (msg.cmd === 'go') {
    let next = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < count) {
          next++;
          try {
            await one();
          } catch {
            failed++;
          }
        }
      }),
    );
    process.send!({ done: true, at: Date.now(), failed });
  }
  if (msg.cmd === 'close') {
    for (const c of open) c.close();
    setTimeout(() => process.exit(0), 500);
  }
});
process.send!({ ready: true });

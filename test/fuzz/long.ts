/**
 * `npm run fuzz`: a million generated frames at a relay in its own process, beside a steady
 * client; reports frames/s, crashes (the relay must stay up), the steady client's failures and
 * the relay's memory before and after (after a forced GC).
 */
import { WebSocket as NodeWebSocket } from 'ws';
import { mintToken, type MintOptions } from '../../src/server/mint.ts';
import { Sdk } from '../../src/sdk.ts';
import { ask, child, message } from '../../bench/procs.ts';
import { table } from '../../bench/lib.ts';
import { fuzz } from './run.ts';

(globalThis as { WebSocket?: unknown }).WebSocket ??= NodeWebSocket;
const SECRET = 'fuzz-secret-0123456789';
const total = Number(process.argv[2] ?? 1_000_000);
const relay = child('server-child.ts', ['relay'], { BENCH_SECRET: SECRET, BENCH_RELAY_CONFIG: JSON.stringify({ messageRate: 1_000_000, messageBurst: 1_000_000, frameRate: 1_000_000, binaryFrameRate: 1_000_000 }) });
let crashed = false;
relay.on('exit', () => (crashed = true));
const { url } = await message<{ url: string }>(relay);
const token = (claims: Omit<MintOptions, 'apiKey' | 'secret'>) => mintToken({ apiKey: 'bench', secret: SECRET, ...claims });
const steady = await Sdk.join({ url, token: token({ roomId: 'steady', participantId: 'steady', grant: { canPublishData: true } }) });
let disconnected = '';
steady.on('disconnected', ({ reason }) => (disconnected = reason));
const before = await ask<{ rss: number; heapUsed: number }>(relay, { cmd: 'rss' });
const report = await fuzz({ url, token }, steady, total, 8, 1234);
await new Promise((r) => setTimeout(r, 2000));
const afterMem = crashed ? null : await ask<{ rss: number; heapUsed: number }>(relay, { cmd: 'rss' });
const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
console.log(`# Fuzz run — ${new Date().toISOString()}\n`);
console.log(
  table(
    ['measure', 'figure'],
    [
      ['frames sent', report.frames.toLocaleString('en-US')],
      ['time, frames/s', `${report.seconds.toFixed(1)} s, ${Math.round(report.frames / report.seconds).toLocaleString('en-US')}/s`],
      ['sockets reopened after the relay closed them', report.reconnects],
      ['relay crashes', crashed ? 'CRASHED' : 0],
      ['steady client: requests during the run / failed / disconnected', `${report.steadyRoundTrips} / ${report.steadyFailures} / ${disconnected || 'no'}`],
      ['relay heap before → after (after GC)', afterMem ? `${mib(before.heapUsed)} → ${mib(afterMem.heapUsed)}` : '-'],
      ['relay RSS before → after', afterMem ? `${mib(before.rss)} → ${mib(afterMem.rss)}` : '-'],
    ],
  ),
);
await steady.leave();
relay.kill();
process.exit(crashed || report.steadyFailures || disconnected ? 1 : 0);

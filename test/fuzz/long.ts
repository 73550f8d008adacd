/**
 * `npm run fuzz`: a million generated frames at a relay in its own process, beside a steady
 * client, then 100,000 generated HTTP requests over raw TCP (`npm run fuzz -- FRAMES REQUESTS SEED`;
 * the seed is 1234 unless given, and printed, so that a run that found something runs again);
 * reports frames/s and requests/s, crashes (the relay must stay up), the steady client's
 * failures, `/healthz` after each HTTP batch and the relay's memory before and after (after a
 * forced GC).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket as NodeWebSocket } from 'ws';
import { mintToken, type MintOptions } from '../../src/server/mint.ts';
import { Sdk } from '../../src/sdk.ts';
import { ask, child, message } from '../../bench/procs.ts';
import { table } from '../../bench/lib.ts';
import { httpFuzz } from './http.ts';
import { fuzz } from './run.ts';

(globalThis as { WebSocket?: unknown }).WebSocket ??= NodeWebSocket;
const SECRET = 'fuzz-secret-0123456789';
const total = Number(process.argv[2] ?? 1_000_000);
const httpTotal = Number(process.argv[3] ?? 100_000);
const seed = Number(process.argv[4] ?? 1234);
// the fuzzers may start recordings and HLS: into a temporary directory, removed at the end
const outputs = mkdtempSync(join(tmpdir(), 'tessera-fuzz-'));
const relay = child('server-child.ts', ['relay'], {
  BENCH_SECRET: SECRET,
  BENCH_RELAY_CONFIG: JSON.stringify({ messageRate: 1_000_000, messageBurst: 1_000_000, frameRate: 1_000_000, binaryFrameRate: 1_000_000, recordingsDir: join(outputs, 'rec'), hlsDir: join(outputs, 'hls') }),
});
let crashed = false;
relay.on('exit', () => (crashed = true));
const { url } = await message<{ url: string }>(relay);
const token = (claims: Omit<MintOptions, 'apiKey' | 'secret'>) => mintToken({ apiKey: 'bench', secret: SECRET, ...claims });
const steady = await Sdk.join({ url, token: token({ roomId: 'steady', participantId: 'steady', grant: { canPublishData: true } }) });
let disconnected = '';
steady.on('disconnected', ({ reason }) => (disconnected = reason));
const before = await ask<{ rss: number; heapUsed: number }>(relay, { cmd: 'rss' });
const report = await fuzz({ url, token }, steady, total, 8, seed);
const authorizations = [token({ roomId: 'fuzz', grant: { canRecord: true } }), token({ roomId: 'steady', grant: { canRecord: true } }), token({ roomId: 'fuzz', grant: {} })];
const http = crashed ? null : await httpFuzz({ port: Number(new URL(url).port), total: httpTotal, seed, authorizations, alive: () => !crashed });
await new Promise((r) => setTimeout(r, 2000));
const afterMem = crashed ? null : await ask<{ rss: number; heapUsed: number }>(relay, { cmd: 'rss' });
const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
console.log(`# Fuzz run — ${new Date().toISOString()}\n`);
console.log(
  table(
    ['measure', 'figure'],
    [
      ['seed', seed],
      ['frames sent', report.frames.toLocaleString('en-US')],
      ['time, frames/s', `${report.seconds.toFixed(1)} s, ${Math.round(report.frames / report.seconds).toLocaleString('en-US')}/s`],
      ['sockets reopened after the relay closed them', report.reconnects],
      ['HTTP requests sent, requests/s', http ? `${http.requests.toLocaleString('en-US')}, ${Math.round(http.requests / http.seconds).toLocaleString('en-US')}/s` : '-'],
      ['HTTP answers by status', http ? Object.entries(http.statuses).map(([k, v]) => `${k}: ${v}`).join(', ') : '-'],
      ['/healthz not 200 after an HTTP batch', http ? http.unhealthy : '-'],
      ['relay crashes', crashed ? 'CRASHED' : 0],
      ['steady client: requests during the run / failed / disconnected', `${report.steadyRoundTrips} / ${report.steadyFailures} / ${disconnected || 'no'}`],
      ['relay heap before → after (after GC)', afterMem ? `${mib(before.heapUsed)} → ${mib(afterMem.heapUsed)}` : '-'],
      ['relay RSS before → after', afterMem ? `${mib(before.rss)} → ${mib(afterMem.rss)}` : '-'],
    ],
  ),
);
// the verdict before the steady client leaves: its own leave is a `disconnected` too
const failed = crashed || report.steadyFailures > 0 || disconnected !== '' || !http || http.unhealthy > 0 || (http.statuses['500'] ?? 0) > 0;
await steady.leave();
relay.kill();
rmSync(outputs, { recursive: true, force: true });
process.exit(failed ? 1 : 0);

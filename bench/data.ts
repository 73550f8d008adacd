/**
 * `npm run bench:data`: pubsub fan-out latency and time-to-all, data stream throughput
 * (Node and Chromium) and relay memory during a large stream — each beside raw `ws` doing the
 * same work in the same run.
 */
import type { ChildProcess } from 'node:child_process';
import { chromium } from '@playwright/test';
import { WebSocket } from 'ws';
import { mintToken } from '../src/server/mint.ts';
import { Sdk } from '../src/sdk.ts';
import { serveStatic } from '../test-e2e/static-server.ts';
import { CHROMIUM_ARGS } from '../playwright.config.ts';
import { ms, summary, table } from './lib.ts';
import { ask, child, message, stop } from './procs.ts';

const SECRET = 'bench-secret-0123456789';
const now = () => performance.timeOrigin + performance.now();
const MiB = 1024 * 1024;
// the data plane's capacity, not the members' budgets: 100 messages a second to 1,000 is 15 MB/s of
// copies past the first, and a member's default fan-out budget (32 MiB/s after a 64 MiB burst) would
// hold a 100 MiB stream to about 89 MiB/s whatever the relay could do
const RELAY_CONFIG = JSON.stringify({ messageRate: 10_000, messageBurst: 10_000, maxBufferedBytes: 64 * MiB, broadcastByteRate: 1024 * MiB, broadcastByteBurst: 1024 * MiB, fanoutByteRate: 1024 * MiB, fanoutByteBurst: 1024 * MiB });

const sleep = (n: number) => new Promise((r) => setTimeout(r, n));

interface Report { latencies: number[]; lastArrival: number; arrivals: number }

async function subscribers(mode: 'sdk' | 'raw', url: string, total: number, processes: number, token = ''): Promise<ChildProcess[]> {
  const per = Math.ceil(total / processes);
  const workers = Array.from({ length: processes }, (_, i) => child('data-worker.ts', [mode, url, String(Math.min(per, total - i * per))], { BENCH_TOKEN: token }));
  await Promise.all(workers.map((w) => message(w, (m: { ready?: boolean }) => m.ready === true)));
  return workers;
}
async function collect(workers: ChildProcess[]): Promise<Report> {
  const reports = await Promise.all(workers.map((w) => { const r = message<Report & { report: boolean }>(w, (m) => m.report); w.send({ cmd: 'report' }); return r; }));
  return { latencies: reports.flatMap((r) => r.latencies), lastArrival: Math.max(...reports.map((r) => r.lastArrival)), arrivals: reports.reduce((n, r) => n + r.arrivals, 0) };
}
/** Reports until `expected` arrivals are in (a slow machine's subscribers may take longer than the pause), or 10 s. */
async function collectAll(workers: ChildProcess[], expected: number): Promise<Report> {
  const total: Report = { latencies: [], lastArrival: 0, arrivals: 0 };
  const until = Date.now() + 10_000;
  for (;;) {
    const rep = await collect(workers);
    total.latencies.push(...rep.latencies);
    total.lastArrival = Math.max(total.lastArrival, rep.lastArrival);
    total.arrivals += rep.arrivals;
    if (total.arrivals >= expected || Date.now() > until) return total;
    await sleep(100);
  }
}
const closeAll = (workers: ChildProcess[]) => Promise.all(workers.map((w) => new Promise((r) => { w.once('exit', r); w.send({ cmd: 'close' }); })));

async function startRelayChild() {
  const relay = child('server-child.ts', ['relay'], { BENCH_SECRET: SECRET, BENCH_RELAY_CONFIG: RELAY_CONFIG });
  const { url } = await message<{ url: string }>(relay);
  return { relay, url };
}
const mint = (claims: Record<string, unknown>) => mintToken({ apiKey: 'bench', secret: SECRET, grant: { canPublishData: true, canSubscribeData: true }, ...claims });

/** One publisher, 1,000 subscribers, 100 messages per second for 5 s. */
async function fanOutLatency(): Promise<string[][]> {
  const { relay, url } = await startRelayChild();
  const workers = await subscribers('sdk', url, 1000, 1, mint({ isViewer: true, ttl: 600 }));
  const publisher = await Sdk.join({ url, token: mint({ roomId: 'data', participantId: 'publisher' }) });
  for (let i = 0; i < 500; i++) {
    await publisher.pubsub.publish('bench', { sentAt: now(), n: i });
    await sleep(10);
  }
  await sleep(300);
  const report = await collect(workers);
  await closeAll(workers);
  await publisher.leave();
  await stop(relay);
  const s = summary(report.latencies);
  return [['pubsub: 1 publisher → 1,000 subscribers, 100 msg/s × 5 s: delivery latency p50 / p99', `${ms(s.p50)} / ${ms(s.p99)}`, '', '', `${report.arrivals.toLocaleString('en-US')} deliveries of 500,000`]];
}

/** One 100-byte message to 10,000 subscribers: time until the last has it. */
async function timeToAll(): Promise<string[][]> {
  const N = 10_000;
  const ROUNDS = 7;
  const raw = child('server-child.ts', ['raw-broadcast']);
  const { url: rawUrl } = await message<{ url: string }>(raw);
  const rawWorkers = await subscribers('raw', rawUrl, N, 2);
  const rawTimes: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const { at } = await ask<{ at: number }>(raw, { cmd: 'broadcast' });
    await sleep(400);
    const rep = await collectAll(rawWorkers, N);
    if (rep.arrivals !== N) throw new Error(`raw: ${rep.arrivals} of ${N}`);
    rawTimes.push(rep.lastArrival - at);
  }
  await closeAll(rawWorkers);
  await stop(raw);

  const { relay, url } = await startRelayChild();
  const workers = await subscribers('sdk', url, N, 2, mint({ isViewer: true, ttl: 600 }));
  const publisher = await Sdk.join({ url, token: mint({ roomId: 'data', participantId: 'publisher' }) });
  await sleep(1200); // let the join storm's count events settle
  await collect(workers);
  const ours: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const at = now();
    await publisher.pubsub.publish('bench', { sentAt: at, pad: 'x'.repeat(40) });
    await sleep(400);
    const rep = await collectAll(workers, N);
    if (rep.arrivals !== N) throw new Error(`ours: ${rep.arrivals} of ${N}`);
    ours.push(rep.lastArrival - at);
  }
  await closeAll(workers);
  await publisher.leave();
  await stop(relay);
  const o = summary(ours);
  const f = summary(rawTimes);
  return [[`pubsub: one 100-byte message to ${N.toLocaleString('en-US')} subscribers, time until all have it (median of ${ROUNDS})`, ms(o.p50), ms(f.p50), `${(o.p50 / f.p50).toFixed(2)}×`, '≤ 1.3×']];
}

async function nodeStream(url: string, bytes: number, forwardRaw: boolean): Promise<number> {
  if (forwardRaw) {
    const a = new WebSocket(url, { perMessageDeflate: false });
    const b = new WebSocket(url, { perMessageDeflate: false });
    await Promise.all([a, b].map((ws) => new Promise((r) => ws.once('open', r))));
    await sleep(50);
    const chunk = Buffer.alloc(64 * 1024, 7);
    const start = performance.now();
    const done = new Promise<void>((resolve) => {
      let got = 0;
      b.on('message', (d: Buffer) => {
        got += d.length;
        if (got >= bytes) resolve();
      });
    });
    for (let sent = 0; sent < bytes; sent += chunk.length) a.send(chunk);
    await done;
    const elapsed = performance.now() - start;
    a.close();
    b.close();
    return elapsed;
  }
  const a = await Sdk.join({ url, token: mint({ roomId: 'stream', participantId: 'a' }) });
  const b = await Sdk.join({ url, token: mint({ roomId: 'stream', participantId: 'b' }) });
  const data = new Uint8Array(bytes).fill(7);
  const start = performance.now();
  const received = new Promise<void>((resolve) => b.dataStream.on('stream', async (s) => { for await (const _ of s) void _; resolve(); }));
  await a.dataStream.send(data);
  await received;
  const elapsed = performance.now() - start;
  await a.leave();
  await b.leave();
  return elapsed;
}

async function streams(): Promise<string[][]> {
  const SIZE = 100 * MiB;
  const raw = child('server-child.ts', ['raw-broadcast']);
  const { url: rawUrl } = await message<{ url: string }>(raw);
  await nodeStream(rawUrl, 10 * MiB, true);
  const rawMs = await nodeStream(rawUrl, SIZE, true);
  await stop(raw);

  const { relay, url } = await startRelayChild();
  await nodeStream(url, 10 * MiB, false);
  // relay memory: peak RSS above baseline, sampled during a 10 MiB and a 100 MiB stream
  const peak = async (bytes: number) => {
    await ask(relay, { cmd: 'rss' });
    const base = (await ask<{ rss: number }>(relay, { cmd: 'rss-now' })).rss;
    let max = base;
    let sampling = true;
    const sampler = (async () => { while (sampling) { max = Math.max(max, (await ask<{ rss: number }>(relay, { cmd: 'rss-now' })).rss); await sleep(20); } })();
    const elapsed = await nodeStream(url, bytes, false);
    sampling = false;
    await sampler;
    return { elapsed, grew: max - base };
  };
  const large = await peak(SIZE);
  const huge = await peak(4 * SIZE);
  await stop(relay);
  const mbps = (bytes: number, msec: number) => `${(bytes / MiB / (msec / 1000)).toFixed(0)} MiB/s`;
  return [
    ['data stream Node → relay → Node, 100 MiB', mbps(SIZE, large.elapsed), mbps(SIZE, rawMs), `${(rawMs / large.elapsed).toFixed(2)}×`, '≥ 0.7×'],
    ['relay RSS growth (peak) during a 100 MiB stream', `${(large.grew / MiB).toFixed(1)} MiB`, '', '', 'bounded'],
    ['relay RSS growth (peak) during a 400 MiB stream', `${(huge.grew / MiB).toFixed(1)} MiB`, '', '', 'not 4× the above'],
  ];
}

async function browserStreams(): Promise<string[][]> {
  const SIZE = 50 * MiB;
  const { server, origin } = await serveStatic();
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', args: CHROMIUM_ARGS, headless: true });
  const pageA = await browser.newPage();
  const pageB = await browser.newPage();
  for (const p of [pageA, pageB]) await p.goto(`${origin}/test-e2e/pages/esm.html`);
  for (const p of [pageA, pageB]) await p.waitForFunction(() => (window as unknown as { Tessera?: unknown }).Tessera);

  const raw = child('server-child.ts', ['raw-broadcast']);
  const { url: rawUrl } = await message<{ url: string }>(raw);
  const rawOnce = async () => {
    await pageB.evaluate(({ url, size }) => {
      const w = window as unknown as { done: Promise<void>; ready: Promise<void> };
      const ws = new WebSocket(url);
      ws.binaryType = 'arraybuffer';
      w.ready = new Promise((r) => (ws.onopen = () => r()));
      w.done = new Promise((resolve) => {
        let got = 0;
        ws.onmessage = (e) => {
          got += (e.data as ArrayBuffer).byteLength;
          if (got >= size) { ws.close(); resolve(); }
        };
      });
    }, { url: rawUrl, size: SIZE });
    await pageB.evaluate(() => (window as unknown as { ready: Promise<void> }).ready);
    const start = performance.now();
    await pageA.evaluate(async ({ url, size }) => {
      const ws = new WebSocket(url);
      await new Promise((r) => (ws.onopen = r));
      const chunk = new Uint8Array(64 * 1024).fill(7);
      for (let sent = 0; sent < size; sent += chunk.length) ws.send(chunk);
      while (ws.bufferedAmount > 0) await new Promise((r) => setTimeout(r, 1));
      (window as unknown as { rawSocket: WebSocket }).rawSocket = ws;
    }, { url: rawUrl, size: SIZE });
    await pageB.evaluate(() => (window as unknown as { done: Promise<void> }).done);
    const elapsed = performance.now() - start;
    await pageA.evaluate(() => (window as unknown as { rawSocket: WebSocket }).rawSocket.close());
    return elapsed;
  };
  await rawOnce();
  const rawMs = await rawOnce();
  await stop(raw);

  const { relay, url } = await startRelayChild();
  const oursOnce = async (n: number) => {
    await pageB.evaluate(async ({ url, t }) => {
      const room = await window.Tessera.Sdk.join({ url, token: t });
      const w = window as unknown as { done: Promise<number>; room: unknown };
      w.room = room;
      w.done = new Promise((resolve) => room.dataStream.on('stream', async (s) => { let n = 0; for await (const c of s) n += c.byteLength; resolve(n); }));
    }, { url, t: mint({ roomId: `page-${n}`, participantId: 'b' }) });
    const start = performance.now();
    await pageA.evaluate(async ({ url, t, size }) => {
      const room = await window.Tessera.Sdk.join({ url, token: t });
      await room.dataStream.send(new Uint8Array(size).fill(7));
      await room.leave();
    }, { url, t: mint({ roomId: `page-${n}`, participantId: 'a' }), size: SIZE });
    const got = await pageB.evaluate(() => (window as unknown as { done: Promise<number> }).done);
    const elapsed = performance.now() - start;
    if (got !== SIZE) throw new Error(`page got ${got}`);
    await pageB.evaluate(() => (window as unknown as { room: { leave(): Promise<void> } }).room.leave());
    return elapsed;
  };
  await oursOnce(0);
  const oursMs = await oursOnce(1);
  await stop(relay);
  await browser.close();
  server.close();
  const mbps = (msec: number) => `${(SIZE / MiB / (msec / 1000)).toFixed(0)} MiB/s`;
  return [['data stream page → relay → page (Chromium), 50 MiB', mbps(oursMs), mbps(rawMs), `${(rawMs / oursMs).toFixed(2)}×`, '≥ 0.7×']];
}

export async function benchData(): Promise<string> {
  const rows = [...(await fanOutLatency()), ...(await timeToAll()), ...(await streams()), ...(await browserStreams())];
  return table(['measure', 'Tessera', 'floor (raw ws)', 'ratio', 'target / note'], rows);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`# Data benchmark — ${new Date().toISOString()}\n`);
  console.log(await benchData());
  process.exit(0);
}

/**
 * `npm run bench:media` (inside a network namespace, like the media tests): Chromium pages
 * publishing and subscribing through the relay, which runs in its own process.
 */
import { chromium, type Browser, type Page } from '@playwright/test';
import { CHROMIUM_ARGS } from '../playwright.config.ts';
import { mintToken } from '../src/server/mint.ts';
import { serveStatic } from '../test-e2e/static-server.ts';
import { summary, table } from './lib.ts';
import { ask, child, message, stop } from './procs.ts';

const SECRET = 'bench-secret-0123456789';
const MEDIA_IP = process.env.TESSERA_E2E_MEDIA_IP ?? '10.99.0.1';
const sleep = (n: number) => new Promise((r) => setTimeout(r, n));
const token = (room: string, id: string) => mintToken({ apiKey: 'bench', secret: SECRET, roomId: room, participantId: id, grant: { canPublish: true, canSubscribe: true } });

async function page(browser: Browser, origin: string, url: string, room: string, id: string, autoSubscribe = true): Promise<Page> {
  const p = await browser.newPage();
  await p.goto(`${origin}/test-e2e/pages/esm.html`);
  await p.waitForFunction(() => (window as unknown as { Tessera?: unknown }).Tessera);
  await p.evaluate(async ({ url, t, autoSubscribe }) => {
    window.room = await window.Tessera.Sdk.join({ url, token: t, autoSubscribe });
  }, { url, t: token(room, id), autoSubscribe });
  await p.evaluate(FIRST_FRAME);
  return p;
}

/**
 * In the page, `window.firstFrame(from)`: resolves with Date.now() once `from`'s camera has a
 * decoded frame. Plain JavaScript in a string: tsx would rewrite a function's source.
 */
const FIRST_FRAME = `window.firstFrame = async (from) => {
  for (;;) {
    const pub = window.room.remoteParticipants.get(from)?.tracks.get('camera');
    let frames = 0;
    const report = pub ? await pub.getStats() : null;
    report?.forEach((s) => { if (s.type === 'inbound-rtp') frames = s.framesDecoded ?? 0; });
    if (frames > 0) return Date.now();
    await new Promise((r) => setTimeout(r, 5));
  }
};`;

type FrameWindow = { firstFrame(from: string): Promise<number> };

export async function benchMedia(): Promise<string> {
  const relay = child('server-child.ts', ['relay'], { BENCH_SECRET: SECRET, BENCH_RELAY_CONFIG: JSON.stringify({ mediaIp: MEDIA_IP }) });
  const { url } = await message<{ url: string }>(relay);
  const { server, origin } = await serveStatic();
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    headless: true,
    args: [...CHROMIUM_ARGS, '--disable-features=WebRtcHideLocalIpsWithMdns'],
  });
  const rows: Array<Array<string | number>> = [];

  // subscribe → first decoded frame, 12 runs
  const a = await page(browser, origin, url, 'latency', 'a');
  await a.evaluate(() => window.room!.localParticipant.publish('camera'));
  const b = await page(browser, origin, url, 'latency', 'b', false);
  await sleep(1000);
  const subscribeMs: number[] = [];
  const signallingMs: number[] = [];
  for (let i = 0; i < 12; i++) {
    const { total, signalling } = await b.evaluate(async () => {
      const pub = window.room!.remoteParticipants.get('a')!.tracks.get('camera')!;
      const start = Date.now();
      await pub.subscribe();
      const subscribed = Date.now();
      const first = await (window as unknown as FrameWindow).firstFrame('a');
      await pub.unsubscribe();
      return { total: first - start, signalling: subscribed - start };
    });
    subscribeMs.push(total);
    signallingMs.push(signalling);
    await sleep(300);
  }
  // publish → first decoded frame at an auto-subscribed page, 10 runs
  await b.evaluate(() => window.room!.leave());
  const watcher = await page(browser, origin, url, 'latency', 'w');
  const publishMs: number[] = [];
  for (let i = 0; i < 10; i++) {
    await a.evaluate(() => window.room!.localParticipant.unpublish('camera'));
    await sleep(300);
    const frame = watcher.evaluate(async () => {
      while (!window.room!.remoteParticipants.get('a')?.tracks.get('camera')) await new Promise((r) => setTimeout(r, 2));
      return (window as unknown as FrameWindow).firstFrame('a');
    });
    const start = await a.evaluate(async () => {
      const t0 = Date.now();
      await window.room!.localParticipant.publish('camera');
      return t0;
    });
    publishMs.push((await frame) - start);
  }
  const s = summary(subscribeMs);
  const p = summary(publishMs);
  const p90 = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length * 0.9)]!;
  rows.push([`subscribe → first decoded frame (${subscribeMs.length} runs)`, `median ${s.p50} ms, p90 ${p90(subscribeMs)} ms`, '≤ 300 ms median']);
  rows.push(['… of which signalling (subscribe request, offer, answer with gathered candidates)', `median ${summary(signallingMs).p50} ms`, '']);
  rows.push([`publish → first decoded frame at a subscriber (${publishMs.length} runs)`, `median ${p.p50} ms, p90 ${p90(publishMs)} ms`, '']);
  await Promise.all([a.close(), watcher.close(), b.close()]);

  if (process.env.BENCH_MEDIA_QUICK) {
    await browser.close();
    server.close();
    await stop(relay);
    return table(['measure', 'figure', 'target'], rows);
  }
  // relay CPU and RSS with 1, 5 and 10 subscriber pages of one 640x480 publisher
  const publisher = await page(browser, origin, url, 'load', 'publisher');
  await publisher.evaluate(() => window.room!.localParticipant.publish('camera'));
  const subscribers: Page[] = [];
  const load: Array<{ n: number; core: number; rss: number; mbps: number }> = [];
  for (const n of [1, 5, 10]) {
    while (subscribers.length < n) subscribers.push(await page(browser, origin, url, 'load', `s${subscribers.length}`));
    await sleep(6000);
    const c0 = await ask<{ cpu: NodeJS.CpuUsage; at: number }>(relay, { cmd: 'cpu' });
    const m0 = await ask<{ stats: Array<{ out: { bytes: number } }> }>(relay, { cmd: 'media-stats' });
    await sleep(10_000);
    const c1 = await ask<{ cpu: NodeJS.CpuUsage; at: number; rss: number }>(relay, { cmd: 'cpu' });
    const m1 = await ask<{ stats: Array<{ out: { bytes: number } }> }>(relay, { cmd: 'media-stats' });
    const seconds = (c1.at - c0.at) / 1000;
    const cpu = (c1.cpu.user - c0.cpu.user + c1.cpu.system - c0.cpu.system) / 1e6 / seconds;
    const out = (m1.stats.reduce((x, r) => x + r.out.bytes, 0) - m0.stats.reduce((x, r) => x + r.out.bytes, 0)) * 8 / seconds / 1e6;
    load.push({ n, core: cpu * 100, rss: c1.rss / 1024 / 1024, mbps: out / n });
  }
  for (const l of load) rows.push([`relay with ${l.n} subscriber page(s)`, `${l.core.toFixed(1)} % of a core, RSS ${l.rss.toFixed(0)} MiB, ${l.mbps.toFixed(2)} Mbps payload per subscriber`, '']);
  const first = load[0]!;
  const last = load.at(-1)!;
  const perSub = (last.core - first.core) / (last.n - first.n);
  const perHalfMbps = perSub / (last.mbps / 0.5);
  rows.push(['per-subscriber increment (1 → 10 pages)', `${perSub.toFixed(2)} % of a core per subscriber = ${perHalfMbps.toFixed(2)} % per 0.5 Mbps`, '≤ 1 % per 0.5 Mbps']);
  await browser.close();
  server.close();
  await stop(relay);
  return table(['measure', 'figure', 'target'], rows);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`# Media benchmark — ${new Date().toISOString()}\n`);
  console.log(await benchMedia());
  process.exit(0);
}

/**
 * `npm run bench:audience`: 10 speakers + 10,000 viewers sharing one domain-wide token, from
 * several client processes, against the relay in its own process — beside a raw ws join storm
 * of the same size against a bare ws server, in the same run.
 */
import type { ChildProcess } from 'node:child_process';
import { mintToken } from '../src/server/mint.ts';
import { Sdk } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import { ms, pageLatencies, summary, table } from './lib.ts';
import { ask, child, message, stop } from './procs.ts';

const VIEWERS = Number(process.env.BENCH_VIEWERS ?? 10_000);
const SPEAKERS = 10;
const WORKERS = Number(process.env.BENCH_WORKERS ?? 2); // one per core: more only adds contention on 2 cores
const CONCURRENCY = 64; // in flight per worker
const SIMULATED = Number(process.env.BENCH_SIMULATED ?? 90_000);
const SECRET = 'bench-secret-0123456789';
const ROOM = 'audience';





interface Storm {
  seconds: number;
  lastAt: number;
  failed: number;
  workers: ChildProcess[];
}

async function storm(mode: 'sdk' | 'raw', url: string, token: string): Promise<Storm> {
  const per = Math.ceil(VIEWERS / WORKERS);
  const workers = Array.from({ length: WORKERS }, (_, i) =>
    child('audience-worker.ts', [mode, url, String(Math.min(per, VIEWERS - i * per)), String(CONCURRENCY)], { BENCH_TOKEN: token, BENCH_ROOM: ROOM }),
  );
  await Promise.all(workers.map((w) => message(w)));
  const done = workers.map((w) => message<{ done: boolean; at: number; failed: number }>(w, (m) => m.done));
  const start = Date.now();
  for (const w of workers) w.send({ cmd: 'go' });
  const results = await Promise.all(done);
  const lastAt = Math.max(...results.map((r) => r.at));
  return { seconds: (lastAt - start) / 1000, lastAt, failed: results.reduce((n, r) => n + r.failed, 0), workers };
}

async function closeStorm(s: Storm): Promise<void> {
  await Promise.all(s.workers.map((w) => new Promise((r) => { w.once('exit', r); w.send({ cmd: 'close' }); })));
}

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

async function rawRound(): Promise<{ storm: Storm; base: number; rss: number }> {
  const raw = child('server-child.ts', ['raw']);
  const started = await message<{ url: string; rss: number }>(raw);
  const s = await storm('raw', started.url, 'x'.repeat(200));
  const mem = await ask<{ rss: number }>(raw, { cmd: 'rss' });
  await closeStorm(s);
  await stop(raw);
  return { storm: s, base: started.rss, rss: mem.rss };
}

interface RelayRound {
  storm: Storm;
  base: number;
  rss: number;
  participantEvents: number;
  countEvents: number;
  settleMs: number | null;
  pages?: { small: ReturnType<typeof summary>; large: ReturnType<typeof summary>; largeViewers: number; smallCost: number; largeCost: number };
}

async function relayRound(measurePaging: boolean): Promise<RelayRound> {
  // pages are measured back to back, far past a member's message and byte budgets: lift those (only)
  const unmetered = { messageRate: 1e6, messageBurst: 1e6, dataByteRate: 1e9, dataByteBurst: 1e9 };
  const relay = child('server-child.ts', ['relay'], { BENCH_SECRET: SECRET, BENCH_RELAY_CONFIG: JSON.stringify(unmetered) });
  const started = await message<{ url: string; rss: number }>(relay);
  const mint = (claims: Record<string, unknown>) => mintToken({ apiKey: 'bench', secret: SECRET, grant: { canSubscribe: true }, ...claims });
  const observer = await Sdk.join({ url: started.url, token: mint({ roomId: ROOM, participantId: 'observer', isViewer: true }) });
  let participantEvents = 0;
  let countEvents = 0;
  let settledAt = 0;
  const expectedTotal = VIEWERS + SPEAKERS + 1;
  observer.on('participant-joined', () => participantEvents++);
  observer.on('participant-left', () => participantEvents++);
  observer.on('participant-count-changed', ({ total }) => {
    countEvents++;
    if (total === expectedTotal && !settledAt) settledAt = Date.now();
  });
  const speakers = await Promise.all(
    Array.from({ length: SPEAKERS }, (_, i) => Sdk.join({ url: started.url, token: mint({ roomId: ROOM, participantId: `speaker-${i}`, grant: { canPublish: true, canSubscribe: true } }) })),
  );
  const s = await storm('sdk', started.url, mint({ isViewer: true, ttl: 3000 }));
  const deadline = Date.now() + 10_000;
  while (!settledAt && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  const mem = await ask<{ rss: number }>(relay, { cmd: 'rss' });
  const round: RelayRound = { storm: s, base: started.rss, rss: mem.rss, participantEvents, countEvents, settleMs: settledAt ? Math.max(0, settledAt - s.lastAt) : null };
  if (measurePaging) {
    await pageLatencies(observer, 300); // warm-up: JIT and caches, not measured
    const small = summary(await pageLatencies(observer, 500));
    const smallCost = (await ask<{ p50us: number }>(relay, { cmd: 'page-cost', room: ROOM, count: 1000 })).p50us;
    await ask(relay, { cmd: 'simulate', room: ROOM, count: SIMULATED });
    await new Promise((r) => setTimeout(r, 700));
    const largeViewers = observer.participantCount.viewer;
    await pageLatencies(observer, 100); // the same warm walk over the grown list
    const large = summary(await pageLatencies(observer, 500));
    const largeCost = (await ask<{ p50us: number }>(relay, { cmd: 'page-cost', room: ROOM, count: 1000 })).p50us;
    round.pages = { small, large, largeViewers, smallCost, largeCost };
  }
  await closeStorm(s);
  for (const sp of speakers) void sp.leave();
  await observer.leave();
  await stop(relay);
  return round;
}

export async function benchAudience(): Promise<string> {
  const raws: Awaited<ReturnType<typeof rawRound>>[] = [];
  const ours: RelayRound[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    raws.push(await rawRound());
    ours.push(await relayRound(r === ROUNDS - 1));
  }
  const ratios = ours.map((o, i) => raws[i]!.storm.seconds / o.storm.seconds);
  const median = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)]!;
  const last = ours.at(-1)!;
  const lastRaw = raws.at(-1)!;
  const pages = last.pages!;
  const perRelay = (last.rss - last.base) / (VIEWERS + SPEAKERS + 1);
  const perRaw = (lastRaw.rss - lastRaw.base) / VIEWERS;
  const kb = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
  const mib = (n: number) => `${(n / 1024 / 1024).toFixed(0)} MiB`;
  const rate = (st: Storm) => `${st.seconds.toFixed(2)} s (${Math.round(VIEWERS / st.seconds).toLocaleString('en-US')}/s)`;
  const failed = ours.reduce((n, o) => n + o.storm.failed, 0);
  return table(
    ['measure', 'Tessera', 'floor (raw ws)', 'ratio', 'target'],
    [
      ...ours.map((o, i) => [`round ${i + 1}: ${VIEWERS.toLocaleString('en-US')} joins, ${WORKERS} client processes`, rate(o.storm), rate(raws[i]!.storm), `${ratios[i]!.toFixed(2)}×`, '']),
      ['join rate, median of the rounds (ours / raw)', '', '', `**${median.toFixed(2)}×**`, '≥ 0.6×'],
      ['failed joins (all rounds)', failed, raws.reduce((n, r) => n + r.storm.failed, 0), '', '0'],
      ['server RSS with the audience in', mib(last.rss), mib(lastRaw.rss), '', ''],
      ['server bytes per connection', kb(perRelay), kb(perRaw), `${(perRelay / perRaw).toFixed(2)}×`, '≤ 2×'],
      ['participant events at the observer (a viewer), each round', ours.map((o) => o.participantEvents).join(', '), '', '', '10'],
      ['count events at the observer, each round', ours.map((o) => o.countEvents).join(', '), '', '', '≈ 1 per 500 ms window'],
      ['last join → settled count at the observer, each round', ours.map((o) => (o.settleMs === null ? 'NOT SETTLED' : `${o.settleMs} ms`)).join(', '), '', '', '≤ 500 ms'],
      [`getParticipants page of 100 at ${(VIEWERS + 1).toLocaleString('en-US')} viewers (p50 / p99)`, `${ms(pages.small.p50)} / ${ms(pages.small.p99)}`, '', '', ''],
      [`getParticipants page of 100 at ${pages.largeViewers.toLocaleString('en-US')} viewers (p50 / p99)`, `${ms(pages.large.p50)} / ${ms(pages.large.p99)}`, '', `${(pages.large.p50 / pages.small.p50).toFixed(2)}×`, 'within 20% (round trip: noisy)'],
      [`relay's own cost of a page of 100 (p50), ${(VIEWERS + 1).toLocaleString('en-US')} → ${pages.largeViewers.toLocaleString('en-US')} viewers`, `${pages.smallCost.toFixed(1)} µs → ${pages.largeCost.toFixed(1)} µs`, '', `${(pages.largeCost / pages.smallCost).toFixed(2)}×`, 'within 20%'],
    ],
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`# Audience benchmark — ${new Date().toISOString()}\n`);
  console.log(await benchAudience());
  process.exit(0);
}

/**
 * `npm run bench:cluster`: relay nodes sharing rooms through a real Redis (issue 14). One room,
 * 10 speakers and an audience through one shared viewer token spread over the nodes, beside
 * the same audience against one node alone (no Redis) in the same run.
 *
 *   npm run bench:cluster                          # 4 nodes, 40,000 viewers
 *   BENCH_VIEWERS=10000 BENCH_NODES=3 npm run bench:cluster
 *
 * Figures: joins per second (cluster against one node), the count settled at an observer on
 * every node after the last join, participant events (exactly the speakers), the cost of a page
 * of 100 from a node that is not the room's home at a quarter of the audience and at all of it,
 * and Redis commands per join (from Redis's own `commandstats`).
 */
import type { ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { mintToken } from '../src/server/mint.ts';
import { Sdk } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import { startRedis } from '../test/redis.ts';
import { ms, pagesBesideFloor, summary, table } from './lib.ts';
import { child, message, stop } from './procs.ts';

const VIEWERS = Number(process.env.BENCH_VIEWERS ?? 40_000);
const NODES = Number(process.env.BENCH_NODES ?? 4);
/** One process holds at most `ulimit -n` sockets (20,000 on this machine): the node alone gets what it can hold. */
const ALONE_VIEWERS = Math.min(VIEWERS, Number(process.env.BENCH_ALONE_VIEWERS ?? 16_000));
const SPEAKERS = 10;
const CONCURRENCY = 32; // joins in flight per client process
const SECRET = 'bench-secret-0123456789';
const ROOM = 'cluster';

const mint = (claims: Record<string, unknown>) => mintToken({ apiKey: 'bench', secret: SECRET, grant: { canSubscribe: true }, ...claims });

/** `count` SDK joins from one client process per URL (a share each), all at once; resolves when all are in. */
async function storm(urls: string[], count: number, token: string): Promise<{ seconds: number; lastAt: number; failed: number; workers: ChildProcess[] }> {
  const per = Math.ceil(count / urls.length);
  const workers = urls.map((url, i) => child('audience-worker.ts', ['sdk', url, String(Math.max(0, Math.min(per, count - i * per))), String(CONCURRENCY)], { BENCH_TOKEN: token, BENCH_ROOM: ROOM }));
  await Promise.all(workers.map((w) => message(w)));
  const done = workers.map((w) => message<{ done: boolean; at: number; failed: number }>(w, (m) => m.done));
  const start = Date.now();
  for (const w of workers) w.send({ cmd: 'go' });
  const results = await Promise.all(done);
  const lastAt = Math.max(...results.map((r) => r.at));
  return { seconds: (lastAt - start) / 1000, lastAt, failed: results.reduce((n, r) => n + r.failed, 0), workers };
}

async function closeWorkers(workers: ChildProcess[]): Promise<void> {
  await Promise.all(workers.map((w) => new Promise((r) => { w.once('exit', r); w.send({ cmd: 'close' }); })));
}

/** Relay processes: with `redis`, nodes of one cluster. Page and message budgets are lifted (pages are measured back to back). */
async function startNodes(n: number, redis: string | null): Promise<{ procs: ChildProcess[]; urls: string[] }> {
  const config = { messageRate: 1e6, messageBurst: 1e6, dataByteRate: 1e9, dataByteBurst: 1e9, ...(redis ? { redis } : {}) };
  const procs = Array.from({ length: n }, () => child('server-child.ts', ['relay'], { BENCH_SECRET: SECRET, BENCH_RELAY_CONFIG: JSON.stringify(config) }));
  const started = await Promise.all(procs.map((p) => message<{ url: string }>(p)));
  return { procs, urls: started.map((s) => s.url) };
}

/**
 * A viewer page's round trip (p50, p99), the stage page asked just before it (p50), and what
 * the viewer page costs above it (the median of the pairs' differences): the part a larger
 * audience could make grow, with what the machine's load adds to both taken out.
 */
interface PageCost {
  p50: number;
  p99: number;
  floorP50: number;
  above: number;
}

function pageCost({ page, floor }: { page: number[]; floor: number[] }): PageCost {
  const p = summary(page);
  return { p50: p.p50, p99: p.p99, floorP50: summary(floor).p50, above: summary(page.map((t, i) => t - floor[i]!)).p50 };
}

interface Round {
  seconds: number;
  failed: number;
  settle: Array<number | null>;
  participantEvents: number[];
  pageQuarter: PageCost;
  pageAll: PageCost;
  commandsPerJoin: number | null;
  viewers: number;
}

async function round(urls: string[], probe: Redis | null, viewers: number): Promise<Round> {
  const commands = async () => {
    if (!probe) return 0;
    const stats = await probe.info('commandstats');
    return [...stats.matchAll(/calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
  };
  // one observer (a viewer) on each node; the first opens the room on node 0
  const observers: Room[] = [];
  for (let i = 0; i < NODES; i++) observers.push(await Sdk.join({ url: urls[i % urls.length]!, token: mint({ roomId: ROOM, participantId: `observer-${i}`, isViewer: true }) }));
  const expected = viewers + SPEAKERS + NODES;
  const settledAt: Array<number | null> = observers.map(() => null);
  const events = observers.map(() => 0);
  observers.forEach((o, i) => {
    o.on('participant-joined', () => events[i]!++);
    o.on('participant-count-changed', ({ total }) => {
      if (total === expected) settledAt[i] ??= Date.now();
    });
  });
  const speakers = await Promise.all(Array.from({ length: SPEAKERS }, (_, i) => Sdk.join({ url: urls[i % urls.length]!, token: mint({ roomId: ROOM, participantId: `speaker-${i}`, grant: { canPublish: true, canSubscribe: true } }) })));
  const viewer = mint({ isViewer: true, ttl: 3000 });
  // as many client processes against one node as against the cluster: only the servers differ
  const clients = Array.from({ length: NODES }, (_, i) => urls[i % urls.length]!);
  const away = observers[observers.length - 1]!; // on the last node: not the room's home in a cluster
  const quarter = Math.floor(viewers / 4);
  const first = await storm(clients, quarter, viewer);
  await pagesBesideFloor(away, 50);
  const pageQuarter = pageCost(await pagesBesideFloor(away, 200));
  const before = await commands();
  const rest = await storm(clients, viewers - quarter, viewer);
  const after = await commands();
  const deadline = Date.now() + 15_000;
  while (settledAt.some((s) => s === null) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  await pagesBesideFloor(away, 50);
  const pageAll = pageCost(await pagesBesideFloor(away, 200));
  const result: Round = {
    seconds: first.seconds + rest.seconds,
    failed: first.failed + rest.failed,
    settle: settledAt.map((s) => (s === null ? null : Math.max(0, s - rest.lastAt))),
    participantEvents: events,
    pageQuarter,
    pageAll,
    commandsPerJoin: probe ? (after - before) / (viewers - quarter) : null,
    viewers,
  };
  await closeWorkers([...first.workers, ...rest.workers]);
  for (const s of speakers) void s.leave();
  for (const o of observers) void o.leave();
  return result;
}

const n = (x: number) => x.toLocaleString('en-US');

export async function benchCluster(): Promise<string> {
  const single = await startNodes(1, null);
  const alone = await round(single.urls, null, ALONE_VIEWERS);
  await Promise.all(single.procs.map(stop));

  const redis = await startRedis();
  const probe = new Redis(redis.url);
  const cluster = await startNodes(NODES, redis.url);
  const spread = await round(cluster.urls, probe, VIEWERS);
  await Promise.all(cluster.procs.map(stop));
  probe.disconnect();
  await redis.stop();

  const perSecond = (r: Round) => r.viewers / r.seconds;
  const rate = (r: Round) => `${n(r.viewers)} in ${r.seconds.toFixed(2)} s (${n(Math.round(perSecond(r)))}/s)`;
  const pageRow = (c: PageCost) => `${ms(c.p50)} / ${ms(c.p99)}; ${ms(c.floorP50)}; ${ms(c.above)}`;
  const settle = (r: Round) => r.settle.map((s) => (s === null ? 'NOT SETTLED' : `${s} ms`)).join(', ');
  return table(
    ['measure', `${NODES} nodes + Redis`, '1 node alone', 'ratio', 'target'],
    [
      [`viewer joins (one shared token), ${NODES} client processes`, rate(spread), rate(alone), `**${(perSecond(spread) / perSecond(alone)).toFixed(2)}×**`, 'joins/s against one node'],
      ['failed joins', spread.failed, alone.failed, '', '0'],
      ['last join → count settled at an observer on each node', settle(spread), settle(alone), '', '≤ 1 s at every node'],
      ['participant events at each observer', spread.participantEvents.join(', '), alone.participantEvents.join(', '), '', `exactly ${SPEAKERS}`],
      [`page of 100 viewers from the last node, at a quarter of the audience (${n(Math.floor(VIEWERS / 4))} / ${n(Math.floor(ALONE_VIEWERS / 4))}): p50 / p99; p50 of the stage page asked just before it; the page above the stage page (median of pairs)`, pageRow(spread.pageQuarter), pageRow(alone.pageQuarter), '', ''],
      [`the same with all of it in (${n(VIEWERS)} / ${n(ALONE_VIEWERS)})`, pageRow(spread.pageAll), pageRow(alone.pageAll), `**${(spread.pageAll.above / spread.pageQuarter.above).toFixed(2)}×** cluster, **${(alone.pageAll.above / alone.pageQuarter.above).toFixed(2)}×** alone (above the stage page, all / quarter)`, 'flat (≈ 1×)'],
      ['Redis commands per viewer join (the last three quarters)', spread.commandsPerJoin!.toFixed(2), '—', '', 'does not grow with the audience'],
    ],
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`# Cluster benchmark — ${new Date().toISOString()}\n`);
  console.log(await benchCluster());
  process.exit(0);
}

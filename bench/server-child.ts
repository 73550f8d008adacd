/**
 * A server process for the audience benchmark: the relay (`relay`) or a bare ws server that
 * answers one message per connection (`raw`, the floor), or every message (`echo`). Driven over IPC: `rss` reports memory
 * after a GC; `simulate` adds cheap in-process viewer members to a room (for paging at 100,000).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { WebSocketServer } from 'ws';
import { effectiveGrant } from '../src/protocol/grant.ts';
import { parseCli } from '../relay/cli-flags.ts';
import { setHeapGrowth } from '../relay/heap-growth.ts';
import { startRelay } from '../relay/server.ts';
import { KeyStore } from '../relay/token/keys.ts';
import type { Member } from '../relay/rooms/types.ts';
import { FanoutBudget } from '../relay/data/fanout-budget.ts';
import { Delivery } from '../relay/delivery.ts';
import { FrameScheduler, type SchedulerOptions } from '../relay/scheduler.ts';

const mode = process.argv[2];
const send = (msg: unknown) => process.send!(msg);
const gc = (globalThis as { gc?: () => void }).gc;

function schedulerOptions(o: SchedulerOptions & { directMs?: number; holdMs?: number }) {
  const frames = new FrameScheduler(o);
  return { frames, delivery: new Delivery(frames, { ...(o.directMs !== undefined ? { directMs: o.directMs } : {}), ...(o.holdMs !== undefined ? { holdMs: o.holdMs } : {}) }) };
}

function memory() {
  gc?.();
  gc?.();
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: m.heapUsed };
}

if (mode === 'relay') {
  // what the `tessera-relay` command sets (BENCH_HEAP_GROWTH=0 leaves V8's own)
  setHeapGrowth(parseCli(process.env.BENCH_HEAP_GROWTH ? ['--heap-growth', process.env.BENCH_HEAP_GROWTH] : [], {}).heapGrowthPercent);
  const relay = await startRelay({
    port: 0,
    keys: new KeyStore({ bench: process.env.BENCH_SECRET! }),
    logLevel: 'silent',
    countIntervalMs: 500,
    joinTimeoutMs: 60_000,
    ...(process.env.BENCH_RELAY_CONFIG ? (JSON.parse(process.env.BENCH_RELAY_CONFIG) as object) : {}),
    // BENCH_SCHEDULER='{"sliceMs":2}': the scheduler's and the delivery's tunables, for experiments
    ...(process.env.BENCH_SCHEDULER ? schedulerOptions(JSON.parse(process.env.BENCH_SCHEDULER) as SchedulerOptions & { directMs?: number; holdMs?: number }) : {}),
  });
  const noop = { send() {}, sendRaw() {}, sendBinary() {}, close() {}, bufferedAmount: 0 };
  // the relay's own event-loop delay since the last `cpu` question (a long synchronous block shows here)
  const lag = monitorEventLoopDelay({ resolution: 5 });
  lag.enable();
  // BENCH_GC_LOG=FILE: every garbage collection's pause ([wall-clock ms, ms, kind]), written at exit
  const gcLog: Array<[number, number, number]> = [];
  if (process.env.BENCH_GC_LOG) {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) gcLog.push([performance.timeOrigin + e.startTime, e.duration, ((e as unknown as { detail?: { kind?: number } }).detail?.kind ?? 0)]);
    }).observe({ entryTypes: ['gc'] });
  }
  // BENCH_MEM_LOG=FILE (a diagnosis: reading V8's heap every 100 ms slows the relay): every 100 ms [wall-clock ms, rss, heap used, external, array buffers, history, held] (MiB), written at exit
  const memLog: number[][] = [];
  if (process.env.BENCH_MEM_LOG) {
    const b = relay.context.budgets;
    const mib = (n: number) => Math.round((n / 1048576) * 10) / 10;
    setInterval(() => {
      const m = process.memoryUsage();
      memLog.push([Date.now(), mib(m.rss), mib(m.heapUsed), mib(m.external), mib(m.arrayBuffers), mib(b.history.inUse), mib(b.held.inUse)]);
    }, 100).unref();
  }
  // BENCH_ALLOC_PROFILE=FILE: V8's sampling heap profile of every allocation, collected or not
  // (a .heapprofile for Chrome's DevTools), written at exit: what feeds the young collections
  const allocations = process.env.BENCH_ALLOC_PROFILE ? new Session() : null;
  if (allocations) {
    allocations.connect();
    allocations.post('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: process.env.BENCH_ALLOC_PROMOTED !== '1' });
  }
  process.on('message', (msg: { cmd: string; room?: string; count?: number; id?: number }) => {
    if (msg.cmd === 'exit') {
      allocations?.post('HeapProfiler.stopSampling', (err, result) => {
        if (!err) writeFileSync(process.env.BENCH_ALLOC_PROFILE!, JSON.stringify(result.profile));
      });
      if (process.env.BENCH_MEM_LOG) writeFileSync(process.env.BENCH_MEM_LOG, JSON.stringify(memLog));
      if (process.env.BENCH_GC_LOG) writeFileSync(process.env.BENCH_GC_LOG, JSON.stringify(gcLog));
      void relay.close().then(() => process.exit(0));
    }
    // process.memoryUsage() walks V8's heap (1–11 ms under the hostile benchmark's attack, every 250 ms in the relay being measured): only the RSS is read
    if (msg.cmd === 'rss-now') send({ id: msg.id, rss: process.memoryUsage.rss() });
    if (msg.cmd === 'cpu') {
      send({ id: msg.id, cpu: process.cpuUsage(), rss: process.memoryUsage.rss(), at: performance.now(), lag: { p99: lag.percentile(99) / 1e6, max: lag.max / 1e6 } });
      lag.reset();
    }
    if (msg.cmd === 'page-cost') {
      // the relay's own cost of a page of 100, without the network: walk the viewer tier
      const room = relay.context.rooms.get('default', msg.room!)!;
      const walk = (pages: number) => {
        const times: number[] = [];
        let after = null as ReturnType<typeof room.page>['next'];
        for (let i = 0; i < pages; i++) {
          const t0 = performance.now();
          const page = room.page('viewer', after, 100);
          JSON.stringify(page.participants);
          times.push(performance.now() - t0);
          after = page.next;
        }
        return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]! * 1000;
      };
      walk(2000);
      send({ id: msg.id, p50us: walk(msg.count!) });
    }
    if (msg.cmd === 'media-stats') {
      const stats = [...relay.context.rooms].map((r) => r.media.stats());
      send({ id: msg.id, stats });
    }
    if (msg.cmd === 'rss') send({ id: msg.id, ...memory() });
    if (msg.cmd === 'simulate') {
      const room = relay.context.rooms.getOrCreate('default', msg.room!, 'room');
      const grant = effectiveGrant({ canSubscribe: true });
      for (let i = 0; i < msg.count!; i++) {
        const member: Member = { id: `sim-${i}`, name: `sim-${i}`, tier: 'viewer', joinedAt: Date.now(), grant, pinned: false, tokenExp: Infinity, tokenKey: '', apiKey: 'bench', project: 'default', domainWide: false, link: noop, fanout: new FanoutBudget({ fanoutByteRate: 1e9, fanoutByteBurst: 1e9, broadcastByteRate: 1e9, broadcastByteBurst: 1e9 }) };
        room.add(member);
      }
      send({ id: msg.id, done: true });
    }
  });
  send({ url: relay.url, ...memory() });
} else if (mode === 'raw') {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
  await new Promise((r) => wss.once('listening', r));
  wss.on('connection', (ws) => ws.once('message', (data) => ws.send(data)));
  process.on('message', (msg: { cmd: string; id?: number }) => {
    if (msg.cmd === 'exit') process.exit(0);
    if (msg.cmd === 'rss') send({ id: msg.id, ...memory() });
  });
  send({ url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}`, ...memory() });
}

if (mode === 'echo') {
  // the machine's floor for a round trip: an idle process answering every frame at once
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
  await new Promise((r) => wss.once('listening', r));
  wss.on('connection', (ws) => ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary })));
  process.on('message', (msg: { cmd: string; id?: number }) => {
    if (msg.cmd === 'exit') process.exit(0);
  });
  send({ url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}` });
}

if (mode === 'raw-broadcast') {
  // the floor of fan-out: one 100-byte text frame to every connected socket, and the floor
  // of throughput: binary frames forwarded from each socket to every other one
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false, maxPayload: 1024 * 1024 });
  await new Promise((r) => wss.once('listening', r));
  wss.on('connection', (ws) =>
    ws.on('message', (data, isBinary) => {
      if (!isBinary) return;
      for (const other of wss.clients) if (other !== ws) other.send(data, { binary: true });
    }),
  );
  process.on('message', (msg: { cmd: string; id?: number }) => {
    if (msg.cmd === 'exit') process.exit(0);
    if (msg.cmd === 'rss') send({ id: msg.id, ...memory() });
    if (msg.cmd === 'broadcast') {
      const at = performance.timeOrigin + performance.now();
      const data = Buffer.from(JSON.stringify({ sentAt: at, pad: 'x'.repeat(40) }));
      for (const ws of wss.clients) ws.send(data, { binary: false });
      send({ id: msg.id, at, sent: wss.clients.size });
    }
  });
  send({ url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}`, ...memory() });
}

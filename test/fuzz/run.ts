/**
 * The protocol fuzzer: generated frames from many sockets — before and after joining, with
 * every grant — at a live relay, beside a well-behaved client whose requests must keep working.
 */
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { GRANT_FLAGS, type Grant } from '../../src/protocol/grant.ts';
import type { Room } from '../../src/room.ts';
import type { TestRelay } from '../helpers.ts';
import { frame, oversized } from './frames.ts';

export interface FuzzReport {
  frames: number;
  seconds: number;
  reconnects: number;
  steadyRoundTrips: number;
  steadyFailures: number;
}

const ALL: Grant = Object.fromEntries(GRANT_FLAGS.map((f) => [f, true]));

let probe = 2 ** 40;

/** Resolve once the relay answers a request sent after everything else (or the socket closes). */
function drained(ws: WebSocket): Promise<void> {
  if (ws.readyState !== WebSocket.OPEN) return Promise.resolve();
  const id = probe++;
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, 10_000);
    function done() {
      clearTimeout(timer);
      ws.off('message', onMessage);
      ws.off('close', done);
      resolve();
    }
    function onMessage(data: unknown, isBinary: boolean) {
      if (!isBinary && String(data).includes(`"id":${id}`)) done();
    }
    ws.on('message', onMessage);
    ws.once('close', done);
    ws.send(JSON.stringify({ type: 'request', id, method: 'participants.list', params: { tier: 'speaker' } }));
  });
}

/** Send `total` generated frames over `sockets` connections (half of them joined). */
export async function fuzz(t: Pick<TestRelay, 'url' | 'token'>, steady: Room, total: number, sockets = 8, seed = 42): Promise<FuzzReport> {
  const samples = fc.sample(frame, { numRuns: Math.min(total, 20_000), seed });
  const big = fc.sample(oversized, { numRuns: 4, seed });
  let sent = 0;
  let reconnects = 0;
  let steadyRoundTrips = 0;
  let steadyFailures = 0;
  const started = performance.now();
  let stop = false;
  const steadyLoop = (async () => {
    while (!stop) {
      try {
        await steady.pubsub.publish('steady', { n: steadyRoundTrips });
        steadyRoundTrips++;
      } catch {
        steadyFailures++;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  async function open(index: number): Promise<WebSocket> {
    const ws = new WebSocket(t.url);
    ws.on('error', () => {});
    await new Promise<void>((resolve) => {
      ws.once('open', () => resolve());
      ws.once('close', () => resolve());
    });
    if (index % 2 === 0 && ws.readyState === WebSocket.OPEN) {
      const token = t.token({ roomId: 'fuzz', grant: ALL, ttl: 600 });
      ws.send(JSON.stringify({ type: 'join', v: 1, token, participantId: `fuzzer-${index}-${reconnects}` }));
    }
    return ws;
  }

  const workers = Array.from({ length: sockets }, async (_, index) => {
    let ws = await open(index);
    while (sent < total) {
      if (ws.readyState !== WebSocket.OPEN) {
        reconnects++;
        ws = await open(index);
        continue;
      }
      const i = sent++;
      const f = i % 5000 === 4999 ? big[(i / 5000) % big.length]! : samples[i % samples.length]!;
      ws.send(f);
      if (ws.bufferedAmount > 256 * 1024 || i % 200 === 0) await new Promise((r) => setImmediate(r));
      // now and then, and at the end: wait until the relay has worked through what was sent
      if (i % 2000 === 1999) await drained(ws);
    }
    await drained(ws);
    ws.terminate();
  });
  await Promise.all(workers);
  stop = true;
  await steadyLoop;
  return { frames: sent, seconds: (performance.now() - started) / 1000, reconnects, steadyRoundTrips, steadyFailures };
}

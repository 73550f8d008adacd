/**
 * `npm run bench:resume`: how long a dropped connection takes to come back (drop → `reconnected`,
 * the room reconciled), beside a raw ws reconnect; and a relay restart under 200 participants.
 */
import { WebSocket } from 'ws';
import { startRelay } from '../relay/server.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken } from '../src/server/mint.ts';
import { Sdk } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import { ms, summary, table } from './lib.ts';

const SECRET = 'bench-secret-0123456789';
const keys = new KeyStore({ bench: SECRET });
const token = (claims: Record<string, unknown>) => mintToken({ apiKey: 'bench', secret: SECRET, grant: { canPublishData: true }, ttl: 600, ...claims });
const drop = (room: Room) => (room as unknown as { connection: { ws: { terminate(): void } } }).connection.ws.terminate();
const next = (room: Room, event: 'reconnected') => new Promise((resolve) => room.once(event, resolve));

const relay = await startRelay({ port: 0, keys, logLevel: 'silent', resumeGraceMs: 15_000 });
// the protocol's own cost: no backoff delay before the first attempt
const room = await Sdk.join({ url: relay.url, token: token({ roomId: 'resume', participantId: 'a' }), reconnect: { initialDelayMs: 0 } });
const others = await Promise.all(Array.from({ length: 9 }, (_, i) => Sdk.join({ url: relay.url, token: token({ roomId: 'resume', participantId: `p${i}` }) })));
await room.pubsub.subscribe('t', () => {});
const resume: number[] = [];
const raw: number[] = [];
for (let i = 0; i < 120; i++) {
  const back = next(room, 'reconnected');
  const start = performance.now();
  drop(room);
  await back;
  if (i >= 20) resume.push(performance.now() - start);
  // the floor: a raw ws connect + one message + reply to the same relay's HTTP server (refused join: one round trip)
  const t0 = performance.now();
  await new Promise<void>((resolve) => {
    const ws = new WebSocket(relay.url);
    ws.once('open', () => ws.send('{"type":"resume","v":1,"credential":"x"}'));
    ws.once('message', () => {
      ws.terminate();
      resolve();
    });
  });
  if (i >= 20) raw.push(performance.now() - t0);
}
const r = summary(resume);
const f = summary(raw);
for (const o of [room, ...others]) await o.leave();
await relay.close();

// a relay restart under a live room of 200 (SIGTERM's path), the clients with their default policy
const first = await startRelay({ port: 0, keys, logLevel: 'silent' });
const port = first.port;
const host = await Sdk.join({ url: first.url, token: token({ roomId: 'big', participantId: 'host' }) });
const shared = token({ isViewer: true });
const audience = await Promise.all(Array.from({ length: 199 }, () => Sdk.join({ url: first.url, token: shared, roomId: 'big' })));
const everyone = [host, ...audience];
const back = everyone.map((o) => next(o, 'reconnected').then(() => performance.now()));
await first.close();
const restartedAt = performance.now();
const second = await startRelay({ port, keys, logLevel: 'silent' });
const times = await Promise.all(back);
while (host.participantCount.total !== 200) await new Promise((res) => setTimeout(res, 10));
const settled = performance.now();
const cameBack = everyone.filter((o) => o.connected).length;
for (const o of everyone) await o.leave();
await second.close();

console.log(`# Resume benchmark — ${new Date().toISOString()}\n`);
console.log(
  table(
    ['measure', 'p50', 'p99', 'note'],
    [
      ['dropped socket → `reconnected` (resume, room reconciled; 100 drops)', ms(r.p50), ms(r.p99), 'first attempt without delay'],
      ['floor: raw ws connect + one frame + answer', ms(f.p50), ms(f.p99), `ratio ${(r.p50 / f.p50).toFixed(2)}×`],
      ['relay restart, 200 participants: came back', `${cameBack} / 200`, '', 'joined anew (the new relay had no session to resume)'],
      ['relay back → last participant reconnected', ms(Math.max(...times) - restartedAt), '', 'default policy: 250 ms first delay, doubling, jitter'],
      ['relay back → the host\'s count exact (200)', ms(settled - restartedAt), '', ''],
    ],
  ),
);
process.exit(0);

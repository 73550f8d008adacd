/**
 * Join latency: SDK in Node → relay on loopback, sequential joins, beside the floor measured
 * in the same run: a raw `ws` connect + 300-byte message + reply to a bare ws server.
 */
import { WebSocketServer, WebSocket } from 'ws';
import { startRelay } from '../relay/server.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken } from '../src/server/mint.ts';
import { Sdk } from '../src/sdk.ts';
import { ms, ratio, summary, table } from './lib.ts';

const SECRET = 'bench-secret-0123456789';

async function rawRoundTrip(url: string, payload: string): Promise<number> {
  const start = performance.now();
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => ws.send(payload));
    ws.once('message', () => resolve());
    ws.once('error', reject);
  });
  const elapsed = performance.now() - start;
  // like the SDK's leave: the next measurement starts once this socket is closed
  await new Promise<void>((resolve) => {
    ws.once('close', () => resolve());
    ws.close();
  });
  return elapsed;
}

export async function benchJoin(count = 1000): Promise<string> {
  const relay = await startRelay({ port: 0, keys: new KeyStore({ bench: SECRET }), logLevel: 'silent' });
  const raw = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
  await new Promise((r) => raw.once('listening', r));
  raw.on('connection', (ws) => ws.on('message', (data) => ws.send(data)));
  const rawUrl = `ws://127.0.0.1:${(raw.address() as { port: number }).port}`;
  const token = mintToken({ apiKey: 'bench', secret: SECRET, roomId: 'bench', participantId: 'joiner', grant: { canSubscribe: true, canPublish: true } });
  const payload = JSON.stringify({ type: 'join', v: 1, token, participantId: 'joiner', pad: '' }).padEnd(300, ' ');
  // a listener in the room, as in real use
  const host = await Sdk.join({ url: relay.url, token: mintToken({ apiKey: 'bench', secret: SECRET, roomId: 'bench', participantId: 'host', grant: {} }) });

  const ours: number[] = [];
  const floor: number[] = [];
  for (let i = 0; i < 50; i++) {
    await rawRoundTrip(rawUrl, payload);
    (await Sdk.join({ url: relay.url, token })).leave();
  }
  for (let i = 0; i < count; i++) {
    floor.push(await rawRoundTrip(rawUrl, payload));
    const start = performance.now();
    const room = await Sdk.join({ url: relay.url, token });
    ours.push(performance.now() - start);
    await room.leave();
  }
  await host.leave();
  await relay.close();
  raw.close();
  const o = summary(ours);
  const f = summary(floor);
  return table(
    ['measure', 'p50', 'p99', 'mean'],
    [
      [`Sdk.join → room (${count} sequential joins)`, ms(o.p50), ms(o.p99), ms(o.mean)],
      [`raw ws connect + 300 B message + reply (${count})`, ms(f.p50), ms(f.p99), ms(f.mean)],
      ['ratio join / raw (target p50 ≤ 1.5×)', ratio(o.p50, f.p50), ratio(o.p99, f.p99), ratio(o.mean, f.mean)],
    ],
  );
}

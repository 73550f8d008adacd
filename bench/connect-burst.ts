/**
 * `node --import tsx bench/connect-burst.ts`: what a thousand sockets connecting at once do to the
 * event loop of the relay, and of a bare `ws` server (the floor), in turn. The clients run in a
 * child process and open every socket in one go (as the attack of `bench:hostile` starts); a timer
 * every millisecond in the server's process measures the longest gaps between its runs. N=…
 * sockets (default 1,000), ROUNDS=… (default 3).
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { WebSocket, WebSocketServer } from 'ws';
import { startRelay } from '../relay/server.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { table } from './lib.ts';

const N = Number(process.env.N ?? 1000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);

if (process.argv[2] === 'client') {
  process.on('message', async (url: string) => {
    const sockets: WebSocket[] = [];
    for (let i = 0; i < N; i++) {
      const ws = new WebSocket(url);
      ws.on('error', () => {});
      sockets.push(ws);
    }
    await Promise.all(sockets.map((ws) => new Promise((r) => (ws.once('open', r), ws.once('close', r)))));
    const open = sockets.filter((ws) => ws.readyState === WebSocket.OPEN).length;
    for (const ws of sockets) ws.terminate();
    process.send!({ open });
  });
  process.send!('ready');
} else {
  const client = fork(fileURLToPath(import.meta.url), ['client'], { execArgv: ['--import', 'tsx'] });
  await new Promise((r) => client.once('message', r));

  /** The longest gaps of a 1 ms timer while the clients connect to `url`. */
  async function burst(url: string): Promise<{ gaps: number[]; ms: number; open: number }> {
    let last = performance.now();
    const gaps: number[] = [];
    const timer = setInterval(() => {
      const now = performance.now();
      gaps.push(now - last);
      last = now;
    }, 1);
    await new Promise((r) => setTimeout(r, 300));
    gaps.length = 0;
    const t0 = performance.now();
    client.send(url);
    const { open } = await new Promise<{ open: number }>((r) => client.once('message', r as never));
    const ms = performance.now() - t0;
    clearInterval(timer);
    await new Promise((r) => setTimeout(r, 500));
    return { gaps: gaps.sort((a, b) => b - a), ms, open };
  }

  const rows: string[][] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise((r) => wss.once('listening', r));
    const raw = await burst(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`);
    await new Promise((r) => wss.close(r));
    const relay = await startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys: new KeyStore({ k: 'x'.repeat(32) }), media: null, maxPendingConnections: 4 * N });
    const ours = await burst(relay.url);
    await relay.close();
    for (const [name, r] of [['bare ws server (floor)', raw], ['relay', ours]] as const) {
      rows.push([String(round), name, `${r.open} in ${r.ms.toFixed(0)} ms`, r.gaps.slice(0, 3).map((g) => g.toFixed(1)).join(' / '), String(r.gaps.filter((g) => g > 5).length)]);
    }
  }
  console.log(`# ${N} sockets connecting at once — ${new Date().toISOString()}\n`);
  console.log(table(['round', 'server', 'open', 'longest 3 gaps of a 1 ms timer, ms', 'gaps over 5 ms'], rows));
  client.kill();
  process.exit(0);
}

/**
 * The flooder of `npm run bench:flood`, in a process of its own: a client on another machine
 * in reality, here it must not take the measuring clients' event loop (in their process it
 * did, and their delays were its own). Asked `{ cmd: 'go', url, token }`, it joins and sends
 * `pubsub.publish` frames as fast as its socket takes them, joining again whenever it is cut
 * off, until `{ cmd: 'halt', id }`, answered with what it sent.
 */
import { WebSocket } from 'ws';

let on = false;
let floodFrames = 0;
let cutOffs = 0;
let running: Promise<void> | null = null;

async function flood(url: string, token: (n: number) => string): Promise<void> {
  while (on) {
    const ws = new WebSocket(url);
    ws.on('error', () => {});
    const opened = await new Promise<boolean>((resolve) => {
      ws.once('open', () => resolve(true));
      ws.once('close', () => resolve(false));
    });
    if (!opened) continue;
    ws.send(JSON.stringify({ type: 'join', v: 1, token: token(cutOffs), participantId: `flooder-${cutOffs}` }));
    let open = true;
    ws.once('close', () => (open = false));
    let id = 0;
    while (on && open) {
      // as fast as the socket takes it: publishes to everyone in the room
      ws.send(JSON.stringify({ type: 'request', id: id++, method: 'pubsub.publish', params: { topic: 'calm', payload: { at: 0, flood: true } } }));
      floodFrames++;
      if (ws.bufferedAmount > 1024 * 1024 || id % 100 === 0) await new Promise((r) => setImmediate(r));
    }
    if (on) cutOffs++;
    ws.terminate();
  }
}

process.on('message', (msg: { cmd: string; id?: number; url?: string; tokens?: string[] }) => {
  if (msg.cmd === 'go') {
    on = true;
    const tokens = msg.tokens!;
    running = flood(msg.url!, (n) => tokens[Math.min(n, tokens.length - 1)]!);
  }
  if (msg.cmd === 'halt') {
    on = false;
    void running?.then(() => process.send!({ id: msg.id, floodFrames, cutOffs }));
  }
  if (msg.cmd === 'exit') process.exit(0);
});
process.send!({ ready: true });

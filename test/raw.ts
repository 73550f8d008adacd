import { WebSocket } from 'ws';

/** A raw protocol client for tests that bypass the SDK. */
export interface RawClient {
  ws: WebSocket;
  frames: Array<Record<string, unknown>>;
  /** Resolves with the close code and reason. */
  closed: Promise<{ code: number; reason: string }>;
  send(frame: unknown): void;
  /** The next frame matching `pick` (already received or future). */
  next(pick?: (f: Record<string, unknown>) => boolean, ms?: number): Promise<Record<string, unknown>>;
  request(method: string, params?: unknown): Promise<Record<string, unknown>>;
}

let ids = 1;

export async function rawConnect(url: string): Promise<RawClient> {
  const ws = new WebSocket(url);
  const frames: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  ws.on('message', (data, isBinary) => {
    if (!isBinary) frames.push(JSON.parse(String(data)) as Record<string, unknown>);
    for (const w of waiters.splice(0)) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => {
      resolve({ code, reason: String(reason) });
      for (const w of waiters.splice(0)) w();
    }),
  );
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const client: RawClient = {
    ws,
    frames,
    closed,
    send: (frame) => ws.send(typeof frame === 'string' || Buffer.isBuffer(frame) ? frame : JSON.stringify(frame)),
    async next(pick = () => true, ms = 3000) {
      const deadline = Date.now() + ms;
      for (;;) {
        // from the start each time: another waiter may have taken a frame before the one this waits for
        for (let at = 0; at < frames.length; at++) if (pick(frames[at]!)) return frames.splice(at, 1)[0]!;
        if (Date.now() > deadline || ws.readyState === WebSocket.CLOSED) throw new Error('no matching frame');
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
    },
    request(method, params = {}) {
      const id = ids++;
      ws.send(JSON.stringify({ type: 'request', id, method, params }));
      return client.next((f) => f.type === 'response' && f.id === id);
    },
  };
  return client;
}

/** Connect and join; resolves with the client once `joined` arrived. */
export async function rawJoin(url: string, token: string, extra: Record<string, unknown> = {}): Promise<RawClient> {
  const client = await rawConnect(url);
  client.send({ type: 'join', v: 1, token, participantId: `raw-${ids++}`, ...extra });
  const first = await client.next();
  if (first.type !== 'joined') throw new Error(`join refused: ${JSON.stringify(first)}`);
  return client;
}

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { CloseCode } from '../src/protocol/codes.ts';
import { DEFAULTS, defaultMediaIp, type RelayConfig } from './config.ts';
import type { RelayContext } from './context.ts';
import { createLogger, type Logger } from './log.ts';
import { Bans } from './rooms/bans.ts';
import { MemoryRoomRegistry } from './rooms/memory-room.ts';
import type { RoomRegistry } from './rooms/types.ts';
import type { OutputName } from '../src/protocol/control.ts';
import type { ProviderFactory } from './outputs/board.ts';
import { localProviders } from './outputs/providers.ts';
import type { MediaEngine } from './media/engine.ts';
import { WeriftEngine } from './media/werift-engine.ts';
import { serveHttp } from './http.ts';
import { Seats } from './seats.ts';
import { Session } from './session.ts';
import type { KeyStore } from './token/keys.ts';

/** Options of {@link startRelay}: the keys, plus any setting to override. */
export type RelayOptions = Partial<RelayConfig> & {
  keys: KeyStore;
  logger?: Logger;
  rooms?: RoomRegistry;
  /** Replace output providers (e.g. a cloud recorder). */
  providers?: Record<OutputName, ProviderFactory>;
  /** Replace the media engine; `null` runs without media. Default: werift. */
  media?: MediaEngine | null;
};

/** A running relay. */
export interface Relay {
  /** `ws://host:port` with the real port. */
  readonly url: string;
  readonly port: number;
  readonly context: RelayContext;
  /** Number of open connections, joined or not. */
  readonly connections: number;
  /** Close every session with `server-shutdown` and stop listening. */
  close(): Promise<void>;
}

/** Start a relay and resolve once it listens. */
export async function startRelay(options: RelayOptions): Promise<Relay> {
  const config: RelayConfig = { ...DEFAULTS, mediaIp: defaultMediaIp(), ...stripUndefined(options) };
  const log = options.logger ?? createLogger(config.logLevel);
  const context: RelayContext = {
    counters: { joins: 0, refusals: new Map() },
    config,
    keys: options.keys,
    rooms:
      options.rooms ??
      new MemoryRoomRegistry({
        limits: config,
        providers: options.providers ?? localProviders(config),
        log,
        media: options.media === undefined ? new WeriftEngine({ mediaIp: config.mediaIp }) : options.media,
      }),
    bans: new Bans(),
    seats: new Seats(),
    log,
  };
  const sessions = new Set<Session>();
  const http: Server = createServer((req, res) => answerHttp(req, res, context, sessions));
  const wss = new WebSocketServer({ server: http, maxPayload: config.maxFrameBytes, perMessageDeflate: false });
  wss.on('connection', (ws) => {
    const session = new Session(ws, context, (s) => sessions.delete(s));
    sessions.add(session);
  });
  wss.on('error', (err) => log.error(`websocket server: ${err.message}`));

  const heartbeat = setInterval(() => {
    for (const session of sessions) session.heartbeat();
    context.bans.prune(Date.now() / 1000);
  }, config.heartbeatMs);
  heartbeat.unref();

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(config.port, config.host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const port = (http.address() as AddressInfo).port;
  let closing: Promise<void> | null = null;

  return {
    url: `ws://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`,
    port,
    context,
    get connections() {
      return sessions.size;
    },
    close() {
      closing ??= (async () => {
        clearInterval(heartbeat);
        for (const session of [...sessions]) session.close(CloseCode.SERVER_SHUTDOWN, 'server-shutdown');
        for (const room of [...context.rooms]) context.rooms.delete(room.id);
        context.seats.dispose();
        // sockets that do not complete the closing handshake in time are cut
        const deadline = setTimeout(() => {
          for (const ws of wss.clients) ws.terminate();
          http.closeAllConnections();
        }, 2000);
        await new Promise<void>((resolve) => wss.close(() => resolve()));
        await new Promise<void>((resolve) => http.close(() => resolve()));
        clearTimeout(deadline);
      })();
      return closing;
    },
  };
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function answerHttp(req: IncomingMessage, res: ServerResponse, context: RelayContext, sessions: Set<Session>): void {
  if (serveHttp(req, res, context, sessions.size)) return;
  res.writeHead(426, { 'content-type': 'text/plain' });
  res.end('This is a Tessera relay: connect with a WebSocket (the Tessera SDK does).\n');
}

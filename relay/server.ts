import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer } from 'ws';
import { CloseCode, wireError } from '../src/protocol/codes.ts';
import { MAX_STREAM_CHUNK_BYTES, MAX_STREAM_WINDOW } from '../src/protocol/messages.ts';
import { checkStorageDirs, DEFAULTS, defaultMediaIp, type RelayConfig } from './config.ts';
import type { RelayContext } from './context.ts';
import { createLogger, type Logger } from './log.ts';
import { Bans } from './rooms/bans.ts';
import { relayBudgets } from './budget.ts';
import { MemoryRoomRegistry } from './rooms/memory-room.ts';
import type { RoomRegistry } from './rooms/types.ts';
import type { ProviderFactories } from './outputs/board.ts';
import { stopAllFfmpeg } from './outputs/ffmpeg/process.ts';
import { mediaOutputsStopped } from './outputs/media-stops.ts';
import { localProviders } from './outputs/providers.ts';
import type { MediaEngine } from './media/engine.ts';
import { WeriftEngine } from './media/werift-engine.ts';
import { checkMediaIp } from './media/udp-errors.ts';
import { serveHttp } from './http.ts';
import { fromPeer, type PeerFiles } from './http-peers.ts';
import { HTTP_SOCKETS, PlainSockets, type SocketRefusal } from './http-sockets.ts';
import { runHere, type ApiRunner } from './api/routes.ts';
import { Seats } from './seats.ts';
import { OVERSIZE_FACTOR, Session } from './session.ts';
import { LocalSeam } from './local-seam.ts';
import { NodeBus } from './cluster/bus.ts';
import { ClusterSeam } from './cluster/cluster-seam.ts';
import { credentialPrefix } from './cluster/credential.ts';
import { RoomObservers } from './rooms/observers.ts';
import type { RoomSeam } from './seam.ts';
import { FrameScheduler, Task, UPGRADE_FLOW } from './scheduler.ts';
import { Delivery } from './delivery.ts';
import { HeartbeatSweep } from './heartbeat.ts';
import { checkWsInternals, WS_PIECE_LIMITS } from './unfinished.ts';
import type { KeyStore } from './token/keys.ts';
import { WebhookObserver } from './webhooks/events.ts';
import { postWebhook } from './webhooks/post.ts';
import { QUEUE_LIMITS, WebhookQueues, type QueueLimits } from './webhooks/queue.ts';

/** How long one webhook attempt may take, the receiver's answer included. */
const WEBHOOK_TIMEOUT_MS = 5000;

/** Options of {@link startRelay}: the keys, plus any setting to override. */
export type RelayOptions = Partial<RelayConfig> & {
  keys: KeyStore;
  logger?: Logger;
  rooms?: RoomRegistry;
  /** Replace output providers (e.g. a cloud recorder). */
  providers?: ProviderFactories;
  /** Replace the media engine; `null` runs without media. Default: werift. */
  media?: MediaEngine | null;
  /** Bounds of webhook delivery (tests shorten the backoff). */
  webhookLimits?: Partial<QueueLimits>;
  /** The scheduler of inbound work (tests give one whose turns they run). */
  frames?: FrameScheduler;
  /** The delivery of outbound frames, on `frames` (tests give one with their own allowance). */
  delivery?: Delivery;
  /** Where connections enter rooms; default: every room in this process ({@link LocalSeam}). */
  seam?: (context: RelayContext) => RoomSeam;
};

/** A running relay. */
export interface Relay {
  /** `ws://host:port` with the real port. */
  readonly url: string;
  readonly port: number;
  readonly context: RelayContext;
  /** Number of open connections, joined or not. */
  readonly connections: number;
  /** WebSocket upgrades waiting for their turn while the relay is busy. */
  readonly upgrading: number;
  /** Close every session with `server-shutdown` and stop listening. */
  close(): Promise<void>;
}

/** The longest a closing relay waits for its media outputs to write their files. */
const MEDIA_STOP_MS = 30_000;
/** Requests one kept-alive socket may make before it is closed (pipelined ones included). */
const HTTP_REQUESTS_PER_SOCKET = 100;

/**
 * A socket's errors end it. Listened to from a function of its own: a closure made in the
 * upgrade handler shares that handler's scope, and kept on the socket for its whole life it kept
 * the upgrade request with it (its headers and the rest: a sixth of what a connection held).
 */
function endOnError(socket: Socket): void {
  socket.on('error', () => socket.destroy());
}

/** Whether an upgrade request is a WebSocket handshake ws would take (RFC 6455 §4.2.1). */
function isHandshake(req: IncomingMessage): boolean {
  const key = req.headers['sec-websocket-key'];
  const version = req.headers['sec-websocket-version'];
  return req.method === 'GET' && req.headers.upgrade?.toLowerCase() === 'websocket' && typeof key === 'string' && /^[+/0-9A-Za-z]{22}==$/.test(key) && (version === '13' || version === '8');
}

/** A GET upgrade that is not a handshake, answered here: ws reads the version as a number (`13.0`, `0xd`) and would switch protocols. */
const NOT_A_HANDSHAKE = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\nSec-WebSocket-Version: 13, 8\r\nContent-Type: text/plain\r\nContent-Length: 27\r\n\r\nnot a WebSocket handshake\r\n';

/** A stream's chunk and window the SDK takes (it refuses a `stream.open` answer past them): a relay set beyond would fail every stream. */
function checkStreamLimits(config: RelayConfig): void {
  const within = (n: number, max: number) => Number.isInteger(n) && n >= 1 && n <= max;
  if (!within(config.streamChunkBytes, MAX_STREAM_CHUNK_BYTES)) throw new Error(`streamChunkBytes must be a whole number from 1 to ${MAX_STREAM_CHUNK_BYTES}, got ${config.streamChunkBytes}`);
  if (!within(config.streamWindow, MAX_STREAM_WINDOW)) throw new Error(`streamWindow must be a whole number from 1 to ${MAX_STREAM_WINDOW}, got ${config.streamWindow}`);
}

/** Start a relay and resolve once it listens. */
export async function startRelay(options: RelayOptions): Promise<Relay> {
  checkWsInternals();
  const config: RelayConfig = { ...DEFAULTS, mediaIp: defaultMediaIp(), ...stripUndefined(options) };
  checkStreamLimits(config);
  checkStorageDirs(config);
  if (options.media === undefined) await checkMediaIp(config.mediaIp);
  const log = options.logger ?? createLogger(config.logLevel);
  const budgets = relayBudgets(config);
  const frames = options.frames ?? new FrameScheduler();
  const webhooks = new WebhookQueues((url, body, authorization) => postWebhook(url, body, authorization, WEBHOOK_TIMEOUT_MS, config.allowPrivateWebhooks), log, { ...QUEUE_LIMITS, ...options.webhookLimits });
  const bus = config.redis ? await NodeBus.connect(config.redis, log) : null;
  const observers = new RoomObservers(new WebhookObserver(options.keys, config.webhookUrl, webhooks));
  const context: RelayContext = {
    counters: { joins: 0, refusals: new Map(), dropped: 0, cut: 0, faults: 0, webhooks },
    config,
    keys: options.keys,
    budgets,
    rooms:
      options.rooms ??
      new MemoryRoomRegistry({
        limits: config,
        providers: options.providers ?? localProviders(config, budgets.whiteboard, budgets.arena, () => options.keys.projectCount),
        log,
        media: options.media === undefined ? new WeriftEngine({ mediaIp: config.mediaIp, maxTransports: config.maxMediaTransports }) : options.media,
        budgets,
        observer: observers,
      }),
    bans: new Bans(),
    lobbyCooldowns: new Bans(),
    frames,
    delivery: options.delivery ?? new Delivery(frames),
    seats: new Seats(bus ? (room) => credentialPrefix(bus.node, room) : undefined, config.maxConnections),
    log,
  };
  const cluster = bus ? new ClusterSeam(context, bus, options.rooms ? null : observers) : null;
  const seam = options.seam?.(context) ?? cluster ?? new LocalSeam(context);
  const api: ApiRunner = cluster ? (route, call) => cluster.runApi(route, call) : runHere;
  const sessions = new Set<Session>();
  // a request must finish its headers within 5 s and itself within 10 s (checked every second):
  // sockets that trickle bytes do not hold file descriptors for Node's default minute
  // sockets that made a plain HTTP request (not an upgrade) have places of their own, a share of
  // them per address: past either a new one is answered 503 and closed
  const plain = new PlainSockets(config.httpSocketsPerAddress, (req) => (cluster ? fromPeer(req, cluster.files.peerKey) : false));
  const http: Server = createServer({ headersTimeout: 5000, requestTimeout: 10_000, connectionsCheckingInterval: 1000 }, (req, res) => {
    const refused = plain.admit(req);
    if (refused) return refuseHttpSocket(res, refused);
    answerHttp(req, res, context, sessions, api, cluster?.files ?? null);
  });
  // ...and a socket that makes no progress for `httpIdleMs` (30 s) is closed: one that pipelines requests and
  // never reads their answers would otherwise hold its descriptor and kernel buffers for ever
  // (ws turns this off on the sockets it upgrades; downloads set their own)
  http.setTimeout(config.httpIdleMs);
  http.maxRequestsPerSocket = HTTP_REQUESTS_PER_SOCKET;
  // every socket, upgraded or not, counts: members, joiners, and a margin for plain HTTP
  http.maxConnections = config.maxConnections + config.maxPendingConnections + HTTP_SOCKETS;
  // frames up to OVERSIZE_FACTOR times the limit are read to be answered; the session lowers it before the join
  const wss = new WebSocketServer({ noServer: true, maxPayload: config.maxFrameBytes * OVERSIZE_FACTOR, perMessageDeflate: false, ...WS_PIECE_LIMITS });
  // connections that have not sent their join frame, oldest first: when they fill their budget,
  // the oldest gives its place to the newcomer (a flood of idle sockets cannot lock joiners out)
  const pending = new Set<Session>();
  const hooks = { authenticated: (s: Session) => pending.delete(s), ended: (s: Session) => (pending.delete(s), sessions.delete(s)) };
  // upgrades are work of their own flow: while the relay is busy they wait their turn like
  // everyone's frames (a crowd of new sockets cannot starve members, nor the join frames of
  // connections already open)
  const upgrades = context.frames.join(UPGRADE_FLOW);
  const upgrading = new Set<Task>();
  const refuse = (socket: Socket) => socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n');
  const accept = (req: IncomingMessage, socket: Socket, head: Buffer) => {
    if (socket.destroyed) return;
    wss.handleUpgrade(req, socket, head, (ws) => {
      const session = new Session(ws, context, seam, hooks, socket);
      sessions.add(session);
      pending.add(session);
    });
  };
  http.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    endOnError(socket);
    // not a WebSocket handshake: ws answers it 400; it takes nobody's place (a joiner waiting for
    // its join frame would otherwise be evicted by a request that costs its sender no socket)
    if (!isHandshake(req)) {
      if (req.method === 'GET') return void socket.end(NOT_A_HANDSHAKE);
      return wss.handleUpgrade(req, socket, head, () => socket.destroy());
    }
    if (sessions.size + upgrading.size >= config.maxConnections) {
      log.warn('connection refused: relay at capacity', { connections: sessions.size });
      refuse(socket);
      return;
    }
    if (pending.size + upgrading.size >= config.maxPendingConnections) {
      const oldest = pending.values().next().value;
      if (!oldest) {
        // every place is taken by upgrades still waiting their turn
        refuse(socket);
        return;
      }
      pending.delete(oldest);
      oldest.evict();
    }
    if (context.frames.open) return context.frames.runNow(upgrades, () => accept(req, socket, head));
    const deadline = Date.now() + config.joinTimeoutMs;
    const forget = () => upgrading.delete(turn);
    const turn = new Task(upgrades, () => {
      upgrading.delete(turn);
      // (the listener shares this handler's scope: left on the socket, it would keep the request)
      socket.off('close', forget);
      // one that waited past the join timeout is dropped: its client has given up by now
      if (Date.now() > deadline) socket.destroy();
      else accept(req, socket, head);
    });
    upgrading.add(turn);
    socket.once('close', forget);
    context.frames.enqueue(turn);
  });
  wss.on('error', (err) => log.error('websocket server error', { error: err.message }));

  const heartbeat = new HeartbeatSweep(sessions, config.heartbeatMs, () => {
    const now = Date.now() / 1000;
    context.bans.prune(now);
    context.lobbyCooldowns.prune(now);
  });
  // what the relay has queued for all members together has a ceiling: past it, the largest queues go first
  const sendSweep = setInterval(() => cutLargestQueues(sessions, config.maxBufferedTotal), 1000);
  sendSweep.unref();

  // the cluster's key signs resume credentials: taken up before the first member can join
  await cluster?.files.takeKey();
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen({ port: config.port, host: config.host, backlog: config.listenBacklog }, () => {
      http.off('error', reject);
      resolve();
    });
  });
  // an accept that fails (the system out of file descriptors or memory) loses that one connection:
  // Node emits it on the server, where no listener meant the end of the process
  http.on('error', (err) => log.warn('http: a connection could not be accepted', { error: err.message }));
  warnIfFewFileDescriptors(config, log);
  const port = (http.address() as AddressInfo).port;
  await cluster?.files.announce(config.nodeUrl ?? nodeBase(config.host, config.mediaIp, port));
  let closing: Promise<void> | null = null;

  return {
    url: `ws://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`,
    port,
    context,
    get connections() {
      return sessions.size;
    },
    get upgrading() {
      return upgrading.size;
    },
    close() {
      closing ??= (async () => {
        heartbeat.stop();
        clearInterval(sendSweep);
        // a cluster node's rooms move on: their records stay, leases and heartbeat are given up first
        await cluster?.leaving();
        for (const session of [...sessions]) session.close(CloseCode.SERVER_SHUTDOWN, 'server-shutdown');
        for (const room of [...context.rooms]) context.rooms.delete(room);
        webhooks.close();
        context.seats.dispose();
        await cluster?.close();
        await bus?.close();
        // the rooms' media outputs finish their files (a recording's MP4), then no ffmpeg is left
        await mediaOutputsStopped(config, MEDIA_STOP_MS);
        await stopAllFfmpeg();
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

function cutLargestQueues(sessions: Set<Session>, ceiling: number): void {
  let total = 0;
  for (const s of sessions) total += s.bufferedAmount;
  if (total <= ceiling) return;
  const largest = [...sessions].sort((a, b) => b.bufferedAmount - a.bufferedAmount);
  for (const s of largest) {
    if (total <= ceiling) break;
    total -= s.bufferedAmount;
    s.relay.log.warn('participant dropped: relay-wide send budget', { participant: s.member?.id, unsent: s.bufferedAmount });
    s.cut(CloseCode.SLOW_CONSUMER, 'slow-consumer');
  }
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Where other nodes reach this one: its listen address, or its media address when it listens on every interface. */
function nodeBase(host: string, mediaIp: string, port: number): string {
  const h = host === '0.0.0.0' || host === '::' || host === '' ? mediaIp : host;
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
}

function refuseHttpSocket(res: ServerResponse, reason: SocketRefusal): void {
  const error = reason === 'http-sockets' ? `this relay serves at most ${HTTP_SOCKETS} plain HTTP connections at once: try again` : 'this client address has too many HTTP connections open: close some, or try again';
  const body = JSON.stringify({ error: wireError('RATE_LIMITED', error, reason) });
  res.writeHead(503, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'retry-after': '1', connection: 'close', 'cache-control': 'no-store' });
  res.end(body);
}

function answerHttp(req: IncomingMessage, res: ServerResponse, context: RelayContext, sessions: Set<Session>, api: ApiRunner, peers: PeerFiles | null): void {
  if (serveHttp(req, res, context, sessions.size, api, peers)) return;
  res.writeHead(426, { 'content-type': 'text/plain' });
  res.end('This is a Tessera relay: connect with a WebSocket (the Tessera SDK does).\n');
}

/**
 * Say at the start when the process may open fewer file descriptors than its limits allow (every
 * socket, joined or not, a UDP socket per media transport, output files and pipes): past the
 * soft limit, connections are refused and files fail to open (each handled, none fatal), long
 * before `--max-connections`. Linux only (`/proc/self/limits`).
 */
function warnIfFewFileDescriptors(config: RelayConfig, log: Logger): void {
  let limits: string;
  try {
    limits = readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return;
  }
  const soft = Number(/^Max open files\s+(\d+)/m.exec(limits)?.[1]);
  const wanted = config.maxConnections + config.maxPendingConnections + HTTP_SOCKETS + config.maxMediaTransports + 256;
  if (Number.isFinite(soft) && soft < wanted) {
    log.warn('the process may open fewer file descriptors than the relay\'s limits allow: raise its limit (ulimit -n, systemd LimitNOFILE) or lower --max-connections', { limit: soft, wanted });
  }
}

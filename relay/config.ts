/**
 * The relay's settings: every one of them (`RelayConfig`), their defaults (documented in
 * `docs/relay.md`) and the few values they are built from. How the command line and the
 * environment set them is `cli-flags.ts`'s.
 */
import { homedir, networkInterfaces } from 'node:os';
import { join } from 'node:path';

export { checkStorageDirs } from './storage-dirs.ts';

/** Log verbosity of the relay. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
/** Every log level, least severe first. */
export const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error', 'silent'];

/** Every setting of the relay. All have defaults except the keys. */
export interface RelayConfig {
  host: string;
  port: number;
  maxTtlRoom: number;
  maxTtlDomain: number;
  /** Window of the participant-count coalescing, in milliseconds. */
  countIntervalMs: number;
  /** How long a connection may take to send its join frame. */
  joinTimeoutMs: number;
  /** How long a plain HTTP socket may make no progress (send nothing, read nothing) before it is closed. */
  httpIdleMs: number;
  /** Downloads (HLS, recordings) one client address (an IPv6 /64) may have at once, in each pool; 0: no share. */
  downloadsPerAddress: number;
  /** Plain HTTP sockets (not upgraded) one client address (an IPv6 /64) may have open at once; 0: no share. */
  httpSocketsPerAddress: number;
  /** The slowest a download may go on average after the HTTP idle time (bytes/s): slower ones are cut. */
  downloadMinRate: number;
  /** Largest frame accepted before the join is authenticated. */
  maxJoinFrameBytes: number;
  /** Largest frame accepted after the join. */
  maxFrameBytes: number;
  /** Interval of the relay's heartbeat; a peer silent for two intervals is dropped. */
  heartbeatMs: number;
  /** A member whose unsent data exceeds this is disconnected as a slow consumer. */
  maxBufferedBytes: number;
  /** The address announced in ICE candidates. */
  mediaIp: string;
  logLevel: LogLevel;
  /** Largest pubsub payload, bytes of its JSON. */
  maxPayloadBytes: number;
  /** Persisted messages kept per topic. */
  historySize: number;
  /** Data messages (publishes, stream opens) a participant may send per second, sustained. */
  messageRate: number;
  /** ...and in a burst. */
  messageBurst: number;
  /** Longest topic name. */
  maxTopicLength: number;
  /** Most topics (with subscribers or history) in one room. */
  maxTopicsPerRoom: number;
  /** Most topics one participant may subscribe to. */
  maxSubscriptions: number;
  /** Largest data stream, bytes. */
  maxStreamBytes: number;
  /** Bytes per stream chunk. */
  streamChunkBytes: number;
  /** Chunks a sender may have in flight before the relay's acknowledgement. */
  streamWindow: number;
  /** A recipient with more unsent bytes than this holds a stream's acknowledgements back. */
  streamHighWater: number;
  /** A data stream that carries nothing for this long is aborted (ms). */
  streamIdleMs: number;
  /** Seconds a lobby request waits when its token gives no `ttl`. */
  lobbyTtl: number;
  /** How long a member whose connection dropped keeps its seat, waiting to resume (ms). */
  resumeGraceMs: number;
  /** Clock skew allowed on a token's `exp` and `nbf`, in seconds. */
  tokenLeeway: number;
  /** Text frames one connection may send per second (and twice that in a burst) before the relay stops reading it for a while. */
  frameRate: number;
  /** The same for binary frames (data stream chunks, 64 KiB each). */
  binaryFrameRate: number;
  /** Bytes of text frames one connection may send per second (each is parsed as JSON). */
  textByteRate: number;
  /** ...in a burst; never less than the largest text frame the relay reads. */
  textByteBurst: number;
  /** Most participants in one room (on stage and in the audience). */
  maxRoomSize: number;
  /** Most on-stage participants in one room: every join and resume carries the whole stage. */
  maxStage: number;
  /** Most rooms on this relay. */
  maxRooms: number;
  /** Where recordings are written (and served from, at `/recordings`). */
  recordingsDir: string;
  /** Bytes of messages (pubsub, streams, whiteboard) one recording's timeline keeps; stage events are always kept. */
  recordingTimelineBytes: number;
  /** Where HLS playlists and segments are written (and served from, at `/hls`). */
  hlsDir: string;
  hlsSegmentSeconds: number;
  /** A `/v1/audio/transcriptions` speech service, if any: the transcription output's default engine. */
  transcriptionUrl?: string;
  /** The ffmpeg the media outputs run: a path, or a name looked up on `PATH`. */
  ffmpeg: string;
  /** Media peer connections (publications and subscriptions) the relay holds at once. */
  maxMediaTransports: number;
  /** The picture of the stage composite that recording, HLS and livestream carry. */
  composite: { width: number; height: number; fps: number; videoKbps: number };
  /** Bearer token `/metrics` asks for; without it, `/metrics` answers only on a loopback listener. */
  metricsToken?: string;
  /** `redis://HOST:PORT`: this relay is a node of a cluster sharing rooms through that Redis. */
  redis?: string;
  /** Where the other nodes of a cluster reach this node's HTTP side (`http://host:port`) for its output files. */
  nodeUrl?: string;
  /** Let `livestream` push to loopback and private addresses (tests, a local RTMP server). */
  allowPrivateRtmp: boolean;
  /** How long an output may take to start before it is `failed` (ms). */
  outputStartTimeoutMs: number;
  /** Starts of one output of one room per minute (and at most this many at once). */
  outputStarts: number;
  /** Free bytes the media outputs leave on the disks they write to (0: no reserve). */
  diskMinFree: number;
  /** Bytes one project's recordings and HLS may take on this relay's disks (0: no quota). */
  diskQuota: number;
  /** Most open connections, joined or not. */
  maxConnections: number;
  /** Most connections that have not yet sent their join frame. */
  maxPendingConnections: number;
  /**
   * Connections the kernel queues for the relay to accept (the OS caps it, on Linux at
   * net.core.somaxconn). Node 20 accepts one connection per turn of its event loop, about a
   * hundred a second when the relay is busy: a deeper queue is a longer wait, not more capacity.
   */
  listenBacklog: number;
  /** Bytes of persisted pubsub history one room keeps (oldest dropped first). */
  historyBytesPerRoom: number;
  /** Bytes of identities pinned tokens used that one room keeps reserved (the oldest of those gone make way). */
  reservedIdsBytesPerRoom: number;
  /** Bytes of reserved identities the whole relay keeps. */
  reservedIdsBytesTotal: number;
  /** Bytes of reserved identities all rooms of one project keep, inside the relay's. */
  reservedIdsBytesPerProject: number;
  /** Bytes of persisted pubsub history the whole relay keeps. */
  historyBytesTotal: number;
  /** Bytes of shapes one whiteboard keeps. */
  whiteboardBytes: number;
  /** Bytes of shapes all whiteboards keep together. */
  whiteboardBytesTotal: number;
  /** Bytes per second a member may send as pubsub payloads and whiteboard shapes, sustained. */
  dataByteRate: number;
  /** ...and in a burst (at least the largest payload). */
  dataByteBurst: number;
  /** Bytes per second a member's sends may make the relay send to others (bytes × recipients). */
  fanoutByteRate: number;
  /** ...in a burst. */
  fanoutByteBurst: number;
  /** Bytes per second of the copies past the first a member's sends make (bytes × (recipients − 1)). */
  broadcastByteRate: number;
  /** ...in a burst. */
  broadcastByteBurst: number;
  /**
   * Bytes per second of arrival and departure events that one token's on-stage members may make
   * the relay send (128 bytes a recipient, at most 8,192 recipients an event), charged when a
   * member leaves for its departure and its arrival; a join is refused while the token is in debt.
   */
  presenceByteRate: number;
  /** ...in a burst. */
  presenceByteBurst: number;
  /** Above this many unsent bytes, a member stops receiving optional traffic (pubsub, whiteboard). */
  sendSoftLimitBytes: number;
  /** Unsent bytes of all members together; past it, the members with the most are cut first. */
  maxBufferedTotal: number;
  /** Bytes of inbound frames all connections together may have waiting for their frame budget. */
  maxHeldTotal: number;
  /** Bytes of messages still arriving (a frame not yet complete, the fragments before the last) one token's sockets may hold together. */
  unfinishedPerToken: number;
  /** ...all sockets together. */
  maxUnfinishedTotal: number;
  /** Subscriptions to topics held by all members together. */
  maxSubscriptionsTotal: number;
  /** Recipients named by the open data streams of all members together (each sender's own at most 1,000, `MAX_NAMED_RECIPIENTS` in `data/streams.ts`). */
  maxStreamRecipientsTotal: number;
  /** Joiners one room's lobby holds. */
  maxLobbyPerRoom: number;
  /** Joiners all lobbies hold together. */
  maxLobbyTotal: number;
  /** Longest a lobby request may wait, seconds (a token's larger ttl is clamped to it). */
  maxLobbyTtl: number;
  /** Seconds a denied joiner waits before it may ask again with the same token. */
  lobbyCooldownSec: number;
  /** Rooms of one project that domain-wide tokens may open (room-scoped tokens have the rest). */
  maxDomainRoomsPerProject: number;
  /**
   * Rooms one project's room-scoped tokens may have open (of `maxRooms`), so that one tenant
   * cannot take every room from the others; `null`: half of `maxRooms` when the keys file holds
   * several projects, all of it when it holds one.
   */
  maxRoomsPerProject: number | null;
  /** Bytes of history all rooms opened by one project's domain-wide tokens keep together. */
  domainHistoryBytes: number;
  /** Data bytes a second of all members of one project that joined with domain-wide tokens (burst: twice). */
  domainDataByteRate: number;
  /** Topic subscriptions all members of one project's domain-wide tokens hold together. */
  domainSubscriptions: number;
  /** Joiners with one project's domain-wide tokens all lobbies hold together. */
  domainLobby: number;
  /** Largest `exp - now` of a server-API token (`admin: true`), seconds. */
  maxTtlAdmin: number;
  /** Server-API requests one API key may make per second (twice that in a burst). */
  apiRate: number;
  /** Where the relay POSTs webhooks of projects that name no `webhookUrl` of their own. */
  webhookUrl?: string;
  /** Let webhooks go to loopback and private addresses (tests, a local receiver). */
  allowPrivateWebhooks: boolean;
}

/** The defaults, each documented in `docs/relay.md`. */
export const DEFAULTS: Readonly<Omit<RelayConfig, 'mediaIp'>> = Object.freeze({
  host: '127.0.0.1',
  port: 7880,
  maxTtlRoom: 86400,
  maxTtlDomain: 3600,
  countIntervalMs: 500,
  joinTimeoutMs: 10_000,
  httpIdleMs: 30_000,
  downloadsPerAddress: 8,
  httpSocketsPerAddress: 128,
  downloadMinRate: 32 * 1024,
  maxJoinFrameBytes: 16 * 1024,
  maxFrameBytes: 256 * 1024,
  heartbeatMs: 15_000,
  maxBufferedBytes: 8 * 1024 * 1024,
  logLevel: 'info',
  maxPayloadBytes: 64 * 1024,
  historySize: 100,
  messageRate: 50,
  messageBurst: 200,
  maxTopicLength: 128,
  maxTopicsPerRoom: 1000,
  maxSubscriptions: 100,
  maxStreamBytes: 4 * 1024 * 1024 * 1024,
  streamChunkBytes: 64 * 1024,
  streamWindow: 16,
  streamHighWater: 1024 * 1024,
  streamIdleMs: 60_000,
  lobbyTtl: 300,
  resumeGraceMs: 15_000,
  tokenLeeway: 30,
  frameRate: 500,
  binaryFrameRate: 4000,
  textByteRate: 1024 * 1024,
  textByteBurst: 2 * 1024 * 1024,
  maxRoomSize: 100_000,
  maxStage: 1_000,
  maxRooms: 10_000,
  recordingsDir: join(homedir(), '.tessera', 'recordings'),
  hlsDir: join(homedir(), '.tessera', 'hls'),
  hlsSegmentSeconds: 2,
  ffmpeg: 'ffmpeg',
  maxMediaTransports: 500,
  composite: compositeSize('1280x720@25'),
  recordingTimelineBytes: 64 * 1024 * 1024,
  allowPrivateRtmp: false,
  outputStartTimeoutMs: 15_000,
  outputStarts: 20,
  diskMinFree: 1024 * 1024 * 1024,
  diskQuota: 16 * 1024 * 1024 * 1024,
  maxConnections: 50_000,
  maxPendingConnections: 2048,
  listenBacklog: 511,
  historyBytesPerRoom: 4 * 1024 * 1024,
  historyBytesTotal: 256 * 1024 * 1024,
  reservedIdsBytesPerRoom: 16 * 1024 * 1024,
  reservedIdsBytesTotal: 128 * 1024 * 1024,
  reservedIdsBytesPerProject: 64 * 1024 * 1024,
  whiteboardBytes: 2 * 1024 * 1024,
  whiteboardBytesTotal: 128 * 1024 * 1024,
  dataByteRate: 1024 * 1024,
  dataByteBurst: 2 * 1024 * 1024,
  fanoutByteRate: 32 * 1024 * 1024,
  fanoutByteBurst: 64 * 1024 * 1024,
  broadcastByteRate: 8 * 1024 * 1024,
  broadcastByteBurst: 16 * 1024 * 1024,
  presenceByteRate: 512 * 1024,
  presenceByteBurst: 4 * 1024 * 1024,
  sendSoftLimitBytes: 1024 * 1024,
  maxBufferedTotal: 1024 * 1024 * 1024,
  maxHeldTotal: 256 * 1024 * 1024,
  unfinishedPerToken: 4 * 1024 * 1024,
  maxUnfinishedTotal: 128 * 1024 * 1024,
  maxSubscriptionsTotal: 500_000,
  maxStreamRecipientsTotal: 500_000,
  maxLobbyPerRoom: 100,
  maxLobbyTotal: 10_000,
  maxLobbyTtl: 3600,
  lobbyCooldownSec: 30,
  maxDomainRoomsPerProject: 100,
  maxRoomsPerProject: null,
  // half of each relay-wide pool: one project's leaked domain-wide token leaves the other half
  domainHistoryBytes: 128 * 1024 * 1024,
  domainDataByteRate: 16 * 1024 * 1024,
  domainSubscriptions: 250_000,
  domainLobby: 5_000,
  maxTtlAdmin: 600,
  apiRate: 20,
  allowPrivateWebhooks: false,
});

/** The first non-internal IPv4 address, else loopback. */
export function defaultMediaIp(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const address of list ?? []) if (address.family === 'IPv4' && !address.internal) return address.address;
  }
  return '127.0.0.1';
}

/** Node's timers hold at most 2^31-1 ms; any wait the relay arms stays below it. */
export const MAX_TIMER_SECONDS = 2_000_000;

/** `WIDTHxHEIGHT[@FPS]`, e.g. `1280x720@25`: even sizes (H.264 4:2:0), within 160x90..1920x1080, 5..60 fps; the bitrate follows the size. */
export function compositeSize(value: string): RelayConfig['composite'] {
  const m = /^(\d{3,4})x(\d{2,4})(?:@(\d{1,2}))?$/.exec(value);
  const [width, height, fps] = m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 25)] : [0, 0, 0];
  if (!m || width % 2 || height % 2 || width < 160 || height < 90 || width > 1920 || height > 1080 || fps < 5 || fps > 60) {
    throw new Error(`--composite must be WIDTHxHEIGHT[@FPS] with even sizes from 160x90 to 1920x1080 and 5..60 fps, got "${value}"`);
  }
  // about 0.1 bit per pixel at 25 fps: 2.5 Mbps at 720p, 0.6 Mbps at 360p
  const videoKbps = Math.max(300, Math.round((width * height * fps * 0.1) / 1000 / 100) * 100);
  return { width, height, fps, videoKbps };
}

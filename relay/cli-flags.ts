/**
 * The `tessera-relay` command line: each flag with its environment variable, how its value is
 * read and checked, and its line of `--help`; `parseCli` reads them into the relay's settings.
 */
import { DEFAULT_HEAP_GROWTH_PERCENT } from './heap-growth.ts';
import { checkStorageDirs } from './storage-dirs.ts';
import { compositeSize, DEFAULTS, defaultMediaIp, LOG_LEVELS, MAX_TIMER_SECONDS, type LogLevel, type RelayConfig } from './config.ts';

/** One command-line flag, its environment variable and how to read it. */
interface Flag {
  flag: string;
  env: string;
  help: string;
  /** A switch: takes no value on the command line (`1`/`true` in its variable). */
  boolean?: true;
  apply(config: CliConfig, value: string): void;
}

/** What the command line yields: the config, plus where the keys come from. */
export interface CliConfig extends RelayConfig {
  keysFile?: string;
  help: boolean;
  /** How far V8's old generation grows past what a full collection kept, percent (see `setHeapGrowth`). */
  heapGrowthPercent: number;
}

/** An `http://` or `https://` URL without user info (checked again, and its address, at each delivery). */
export function webhookUrl(name: string, value: string): string {
  if (!/^https?:\/\/[^/@\s]+(\/\S*)?$/i.test(value) || value.length > 2048) throw new Error(`${name} must be an http:// or https:// URL, got "${value.slice(0, 80)}"`);
  return value;
}

/** An `http://` or `https://` base URL (no path, query or credentials), or a usage error. */
function nodeUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`--node-url needs a URL such as http://10.0.0.5:7880, not ${JSON.stringify(value)}`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) {
    throw new Error(`--node-url needs an http:// or https:// URL of a host and port only, not ${JSON.stringify(value)}`);
  }
  return url.origin;
}

/** A `redis://` or `rediss://` URL, or a usage error. */
function redisUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`--redis needs a URL such as redis://127.0.0.1:6379, not ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new Error(`--redis needs a redis:// or rediss:// URL, not ${JSON.stringify(value)}`);
  return value;
}

function integer(name: string, value: string, min: number): number {
  // Number('') and Number(' ') are 0: an empty value is not a zero
  const n = value.trim() === '' ? Number.NaN : Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be an integer ≥ ${min}, got "${value}"`);
  return n;
}

const FLAGS: readonly Flag[] = [
  { flag: '--host', env: 'TESSERA_HOST', help: `address to listen on (default ${DEFAULTS.host})`, apply: (c, v) => void (c.host = v) },
  { flag: '--port', env: 'TESSERA_PORT', help: `port; 0 picks a free one (default ${DEFAULTS.port})`, apply: (c, v) => void (c.port = integer('--port', v, 0)) },
  { flag: '--keys', env: 'TESSERA_KEYS', help: 'JSON keys file {"keys":{apiKey:secret},"revoked":[apiKey]}; re-read on SIGHUP. Without it: dev mode', apply: (c, v) => void (c.keysFile = v) },
  { flag: '--max-ttl-room', env: 'TESSERA_MAX_TTL_ROOM', help: `largest exp-now of a room-scoped token, seconds (default ${DEFAULTS.maxTtlRoom})`, apply: (c, v) => void (c.maxTtlRoom = integer('--max-ttl-room', v, 1)) },
  { flag: '--max-ttl-domain', env: 'TESSERA_MAX_TTL_DOMAIN', help: `largest exp-now of a domain-wide token, seconds (default ${DEFAULTS.maxTtlDomain})`, apply: (c, v) => void (c.maxTtlDomain = integer('--max-ttl-domain', v, 1)) },
  { flag: '--count-interval', env: 'TESSERA_COUNT_INTERVAL', help: `participant-count coalescing window, ms (default ${DEFAULTS.countIntervalMs})`, apply: (c, v) => void (c.countIntervalMs = integer('--count-interval', v, 10)) },
  { flag: '--join-timeout', env: 'TESSERA_JOIN_TIMEOUT', help: `ms a connection may take to send its join frame (default ${DEFAULTS.joinTimeoutMs})`, apply: (c, v) => void (c.joinTimeoutMs = integer('--join-timeout', v, 100)) },
  { flag: '--max-frame', env: 'TESSERA_MAX_FRAME', help: `largest frame after the join, bytes (default ${DEFAULTS.maxFrameBytes})`, apply: (c, v) => void (c.maxFrameBytes = integer('--max-frame', v, 1024)) },
  { flag: '--heartbeat', env: 'TESSERA_HEARTBEAT', help: `heartbeat interval, ms (default ${DEFAULTS.heartbeatMs})`, apply: (c, v) => void (c.heartbeatMs = integer('--heartbeat', v, 100)) },
  { flag: '--max-payload', env: 'TESSERA_MAX_PAYLOAD', help: `largest pubsub payload, bytes (default ${DEFAULTS.maxPayloadBytes})`, apply: (c, v) => void (c.maxPayloadBytes = integer('--max-payload', v, 1)) },
  { flag: '--history-size', env: 'TESSERA_HISTORY_SIZE', help: `persisted messages kept per topic (default ${DEFAULTS.historySize})`, apply: (c, v) => void (c.historySize = integer('--history-size', v, 0)) },
  { flag: '--message-rate', env: 'TESSERA_MESSAGE_RATE', help: `data messages per second per participant (default ${DEFAULTS.messageRate})`, apply: (c, v) => void (c.messageRate = integer('--message-rate', v, 1)) },
  { flag: '--message-burst', env: 'TESSERA_MESSAGE_BURST', help: `data messages in a burst (default ${DEFAULTS.messageBurst})`, apply: (c, v) => void (c.messageBurst = integer('--message-burst', v, 1)) },
  { flag: '--max-topic-length', env: 'TESSERA_MAX_TOPIC_LENGTH', help: `longest topic name (default ${DEFAULTS.maxTopicLength})`, apply: (c, v) => void (c.maxTopicLength = Math.min(1024, integer('--max-topic-length', v, 1))) },
  { flag: '--max-topics', env: 'TESSERA_MAX_TOPICS', help: `most topics per room (default ${DEFAULTS.maxTopicsPerRoom})`, apply: (c, v) => void (c.maxTopicsPerRoom = integer('--max-topics', v, 1)) },
  { flag: '--max-stream', env: 'TESSERA_MAX_STREAM', help: `largest data stream, bytes (default ${DEFAULTS.maxStreamBytes})`, apply: (c, v) => void (c.maxStreamBytes = integer('--max-stream', v, 0)) },
  { flag: '--stream-idle', env: 'TESSERA_STREAM_IDLE', help: `ms a data stream may carry nothing before it is aborted (default ${DEFAULTS.streamIdleMs})`, apply: (c, v) => void (c.streamIdleMs = integer('--stream-idle', v, 1000)) },
  { flag: '--frame-rate', env: 'TESSERA_FRAME_RATE', help: `text frames per second per connection before it is read more slowly (default ${DEFAULTS.frameRate})`, apply: (c, v) => void (c.frameRate = integer('--frame-rate', v, 1)) },
  { flag: '--text-byte-rate', env: 'TESSERA_TEXT_BYTE_RATE', help: `bytes of text frames per second per connection (default ${DEFAULTS.textByteRate})`, apply: (c, v) => void (c.textByteRate = integer('--text-byte-rate', v, 1024)) },
  { flag: '--text-byte-burst', env: 'TESSERA_TEXT_BYTE_BURST', help: `...in a burst, at least four times --max-frame (default ${DEFAULTS.textByteBurst})`, apply: (c, v) => void (c.textByteBurst = integer('--text-byte-burst', v, 1024)) },
  { flag: '--max-room-size', env: 'TESSERA_MAX_ROOM_SIZE', help: `most participants in one room (default ${DEFAULTS.maxRoomSize})`, apply: (c, v) => void (c.maxRoomSize = integer('--max-room-size', v, 1)) },
  { flag: '--max-stage', env: 'TESSERA_MAX_STAGE', help: `most on-stage participants in one room (default ${DEFAULTS.maxStage})`, apply: (c, v) => void (c.maxStage = integer('--max-stage', v, 1)) },
  { flag: '--max-rooms', env: 'TESSERA_MAX_ROOMS', help: `most rooms on this relay (default ${DEFAULTS.maxRooms})`, apply: (c, v) => void (c.maxRooms = integer('--max-rooms', v, 1)) },
  { flag: '--resume-grace', env: 'TESSERA_RESUME_GRACE', help: `ms a dropped participant keeps its seat waiting to resume (default ${DEFAULTS.resumeGraceMs})`, apply: (c, v) => void (c.resumeGraceMs = integer('--resume-grace', v, 0)) },
  { flag: '--lobby-ttl', env: 'TESSERA_LOBBY_TTL', help: `seconds a lobby request waits when its token sets no ttl (default ${DEFAULTS.lobbyTtl})`, apply: (c, v) => void (c.lobbyTtl = integer('--lobby-ttl', v, 1)) },
  { flag: '--recordings-dir', env: 'TESSERA_RECORDINGS_DIR', help: `where recordings are written (default ${DEFAULTS.recordingsDir})`, apply: (c, v) => void (c.recordingsDir = v) },
  { flag: '--recording-timeline-bytes', env: 'TESSERA_RECORDING_TIMELINE_BYTES', help: `bytes of messages one recording's timeline keeps (default ${DEFAULTS.recordingTimelineBytes})`, apply: (c, v) => void (c.recordingTimelineBytes = integer('--recording-timeline-bytes', v, 0)) },
  { flag: '--hls-dir', env: 'TESSERA_HLS_DIR', help: `where HLS playlists and segments are written (default ${DEFAULTS.hlsDir})`, apply: (c, v) => void (c.hlsDir = v) },
  { flag: '--ffmpeg', env: 'TESSERA_FFMPEG', help: `the ffmpeg media outputs run (default ${DEFAULTS.ffmpeg}, found on PATH)`, apply: (c, v) => void (c.ffmpeg = v) },
  { flag: '--max-media-transports', env: 'TESSERA_MAX_MEDIA_TRANSPORTS', help: `media peer connections (publications + subscriptions) the relay holds at once (default ${DEFAULTS.maxMediaTransports})`, apply: (c, v) => void (c.maxMediaTransports = integer('--max-media-transports', v, 1)) },
  { flag: '--composite', env: 'TESSERA_COMPOSITE', help: `the stage composite's picture, WIDTHxHEIGHT[@FPS] (default ${DEFAULTS.composite.width}x${DEFAULTS.composite.height}@${DEFAULTS.composite.fps})`, apply: (c, v) => void (c.composite = compositeSize(v)) },
  { flag: '--transcription-url', env: 'TESSERA_TRANSCRIPTION_URL', help: 'a speech service speaking POST /v1/audio/transcriptions (the transcription output\'s default engine when set; else the local one, pocketsphinx); none by default', apply: (c, v) => void (c.transcriptionUrl = v) },
  { flag: '--redis', env: 'TESSERA_REDIS', help: 'redis://HOST:PORT: run as a node of a cluster sharing rooms through this Redis (docs/scaling.md); without it every room is in this process', apply: (c, v) => void (c.redis = redisUrl(v)) },
  { flag: '--node-url', env: 'TESSERA_NODE_URL', help: "http(s)://HOST:PORT where the other nodes of a cluster reach this node for the recordings and HLS it writes (default http://<--host, or --media-ip when the host is a wildcard>:<port>)", apply: (c, v) => void (c.nodeUrl = nodeUrl(v)) },
  {
    flag: '--heap-growth', env: 'TESSERA_HEAP_GROWTH', help: `percent V8's old generation may grow past what a full GC kept before the next one: fewer GC pauses for more memory; 0 leaves V8's own (default and most ${DEFAULT_HEAP_GROWTH_PERCENT})`,
    apply: (c, v) => {
      const n = integer('--heap-growth', v, 0);
      if (n > DEFAULT_HEAP_GROWTH_PERCENT) throw new Error(`--heap-growth must be at most ${DEFAULT_HEAP_GROWTH_PERCENT} (V8's own largest), got "${v}"`);
      c.heapGrowthPercent = n;
    },
  },
  { flag: '--metrics-token', env: 'TESSERA_METRICS_TOKEN', help: 'bearer token /metrics asks for (without it, /metrics answers only when listening on loopback)', apply: (c, v) => void (c.metricsToken = v) },
  { flag: '--allow-private-rtmp', env: 'TESSERA_ALLOW_PRIVATE_RTMP', boolean: true, help: 'let livestream push to loopback and private addresses (off by default)', apply: (c, v) => void (c.allowPrivateRtmp = v === '1' || v === 'true') },
  { flag: '--output-start-timeout', env: 'TESSERA_OUTPUT_START_TIMEOUT', help: `ms an output may take to start before it fails (default ${DEFAULTS.outputStartTimeoutMs})`, apply: (c, v) => void (c.outputStartTimeoutMs = integer('--output-start-timeout', v, 100)) },
  { flag: '--output-starts', env: 'TESSERA_OUTPUT_STARTS', help: `starts of one output of one room per minute, at most this many at once (default ${DEFAULTS.outputStarts})`, apply: (c, v) => void (c.outputStarts = integer('--output-starts', v, 1)) },
  { flag: '--disk-min-free', env: 'TESSERA_DISK_MIN_FREE', help: `bytes recordings and HLS leave free on their disks; 0 for none (default ${DEFAULTS.diskMinFree})`, apply: (c, v) => void (c.diskMinFree = integer('--disk-min-free', v, 0)) },
  { flag: '--disk-quota', env: 'TESSERA_DISK_QUOTA', help: `bytes one project's recordings and HLS may take on this relay's disks; 0 for no quota (default ${DEFAULTS.diskQuota})`, apply: (c, v) => void (c.diskQuota = integer('--disk-quota', v, 0)) },
  { flag: '--max-connections', env: 'TESSERA_MAX_CONNECTIONS', help: `most open connections (default ${DEFAULTS.maxConnections})`, apply: (c, v) => void (c.maxConnections = integer('--max-connections', v, 1)) },
  { flag: '--max-pending', env: 'TESSERA_MAX_PENDING', help: `most connections not yet joined (default ${DEFAULTS.maxPendingConnections})`, apply: (c, v) => void (c.maxPendingConnections = integer('--max-pending', v, 1)) },
  { flag: '--listen-backlog', env: 'TESSERA_LISTEN_BACKLOG', help: `connections the kernel queues before the relay accepts them (default ${DEFAULTS.listenBacklog}; the OS may cap it)`, apply: (c, v) => void (c.listenBacklog = integer('--listen-backlog', v, 1)) },
  { flag: '--history-bytes', env: 'TESSERA_HISTORY_BYTES', help: `bytes of pubsub history per room (default ${DEFAULTS.historyBytesPerRoom})`, apply: (c, v) => void (c.historyBytesPerRoom = integer('--history-bytes', v, 0)) },
  { flag: '--reserved-ids-bytes', env: 'TESSERA_RESERVED_IDS_BYTES', help: `bytes of identities pinned tokens used that one room keeps reserved; the oldest of those gone make way (default ${DEFAULTS.reservedIdsBytesPerRoom})`, apply: (c, v) => void (c.reservedIdsBytesPerRoom = integer('--reserved-ids-bytes', v, 0)) },
  { flag: '--reserved-ids-bytes-total', env: 'TESSERA_RESERVED_IDS_BYTES_TOTAL', help: `bytes of reserved identities the relay keeps (default ${DEFAULTS.reservedIdsBytesTotal})`, apply: (c, v) => void (c.reservedIdsBytesTotal = integer('--reserved-ids-bytes-total', v, 0)) },
  { flag: '--reserved-ids-bytes-project', env: 'TESSERA_RESERVED_IDS_BYTES_PROJECT', help: `bytes of reserved identities all rooms of one project keep, inside the relay's (default ${DEFAULTS.reservedIdsBytesPerProject})`, apply: (c, v) => void (c.reservedIdsBytesPerProject = integer('--reserved-ids-bytes-project', v, 0)) },
  { flag: '--history-bytes-total', env: 'TESSERA_HISTORY_BYTES_TOTAL', help: `bytes of pubsub history on the relay (default ${DEFAULTS.historyBytesTotal})`, apply: (c, v) => void (c.historyBytesTotal = integer('--history-bytes-total', v, 0)) },
  { flag: '--whiteboard-bytes', env: 'TESSERA_WHITEBOARD_BYTES', help: `bytes of shapes per whiteboard (default ${DEFAULTS.whiteboardBytes})`, apply: (c, v) => void (c.whiteboardBytes = integer('--whiteboard-bytes', v, 1024)) },
  { flag: '--whiteboard-bytes-total', env: 'TESSERA_WHITEBOARD_BYTES_TOTAL', help: `bytes of shapes of all whiteboards (default ${DEFAULTS.whiteboardBytesTotal})`, apply: (c, v) => void (c.whiteboardBytesTotal = integer('--whiteboard-bytes-total', v, 1024)) },
  { flag: '--data-byte-rate', env: 'TESSERA_DATA_BYTE_RATE', help: `bytes/s of pubsub payloads and shapes per member (default ${DEFAULTS.dataByteRate})`, apply: (c, v) => void (c.dataByteRate = integer('--data-byte-rate', v, 1024)) },
  { flag: '--data-byte-burst', env: 'TESSERA_DATA_BYTE_BURST', help: `...in a burst (default ${DEFAULTS.dataByteBurst})`, apply: (c, v) => void (c.dataByteBurst = integer('--data-byte-burst', v, 1024)) },
  { flag: '--fanout-byte-rate', env: 'TESSERA_FANOUT_BYTE_RATE', help: `bytes/s a member's sends may make the relay send to others (default ${DEFAULTS.fanoutByteRate})`, apply: (c, v) => void (c.fanoutByteRate = integer('--fanout-byte-rate', v, 1024)) },
  { flag: '--fanout-byte-burst', env: 'TESSERA_FANOUT_BYTE_BURST', help: `...in a burst (default ${DEFAULTS.fanoutByteBurst})`, apply: (c, v) => void (c.fanoutByteBurst = integer('--fanout-byte-burst', v, 1024)) },
  { flag: '--broadcast-byte-rate', env: 'TESSERA_BROADCAST_BYTE_RATE', help: `bytes/s of the copies past the first a member's sends may make the relay send (default ${DEFAULTS.broadcastByteRate})`, apply: (c, v) => void (c.broadcastByteRate = integer('--broadcast-byte-rate', v, 1024)) },
  { flag: '--broadcast-byte-burst', env: 'TESSERA_BROADCAST_BYTE_BURST', help: `...in a burst (default ${DEFAULTS.broadcastByteBurst})`, apply: (c, v) => void (c.broadcastByteBurst = integer('--broadcast-byte-burst', v, 1024)) },
  { flag: '--presence-byte-rate', env: 'TESSERA_PRESENCE_BYTE_RATE', help: `bytes/s of arrival and departure events one token's on-stage members may make the relay send (default ${DEFAULTS.presenceByteRate})`, apply: (c, v) => void (c.presenceByteRate = integer('--presence-byte-rate', v, 1024)) },
  { flag: '--presence-byte-burst', env: 'TESSERA_PRESENCE_BYTE_BURST', help: `...in a burst (default ${DEFAULTS.presenceByteBurst})`, apply: (c, v) => void (c.presenceByteBurst = integer('--presence-byte-burst', v, 1024)) },
  { flag: '--send-soft-limit', env: 'TESSERA_SEND_SOFT_LIMIT', help: `unsent bytes above which a member gets no optional traffic (default ${DEFAULTS.sendSoftLimitBytes})`, apply: (c, v) => void (c.sendSoftLimitBytes = integer('--send-soft-limit', v, 1024)) },
  { flag: '--max-buffered', env: 'TESSERA_MAX_BUFFERED', help: `unsent bytes at which a member is cut as a slow consumer (default ${DEFAULTS.maxBufferedBytes})`, apply: (c, v) => void (c.maxBufferedBytes = integer('--max-buffered', v, 1024)) },
  { flag: '--max-buffered-total', env: 'TESSERA_MAX_BUFFERED_TOTAL', help: `unsent bytes of all members (default ${DEFAULTS.maxBufferedTotal})`, apply: (c, v) => void (c.maxBufferedTotal = integer('--max-buffered-total', v, 1024)) },
  { flag: '--max-held-total', env: 'TESSERA_MAX_HELD_TOTAL', help: `bytes of inbound frames waiting for their frame budget, all connections (default ${DEFAULTS.maxHeldTotal})`, apply: (c, v) => void (c.maxHeldTotal = integer('--max-held-total', v, 1024)) },
  { flag: '--unfinished-per-token', env: 'TESSERA_UNFINISHED_PER_TOKEN', help: `bytes of messages still arriving that one token's sockets may hold together (default ${DEFAULTS.unfinishedPerToken})`, apply: (c, v) => void (c.unfinishedPerToken = integer('--unfinished-per-token', v, 1024)) },
  { flag: '--max-unfinished-total', env: 'TESSERA_MAX_UNFINISHED_TOTAL', help: `bytes of messages still arriving, all sockets (default ${DEFAULTS.maxUnfinishedTotal})`, apply: (c, v) => void (c.maxUnfinishedTotal = integer('--max-unfinished-total', v, 1024)) },
  { flag: '--max-subscriptions', env: 'TESSERA_MAX_SUBSCRIPTIONS', help: `topics one member may subscribe to (default ${DEFAULTS.maxSubscriptions})`, apply: (c, v) => void (c.maxSubscriptions = integer('--max-subscriptions', v, 1)) },
  { flag: '--max-stream-recipients-total', env: 'TESSERA_MAX_STREAM_RECIPIENTS_TOTAL', help: `recipients named by open data streams on the relay (default ${DEFAULTS.maxStreamRecipientsTotal})`, apply: (c, v) => void (c.maxStreamRecipientsTotal = integer('--max-stream-recipients-total', v, 1)) },
  { flag: '--max-subscriptions-total', env: 'TESSERA_MAX_SUBSCRIPTIONS_TOTAL', help: `topic subscriptions on the relay (default ${DEFAULTS.maxSubscriptionsTotal})`, apply: (c, v) => void (c.maxSubscriptionsTotal = integer('--max-subscriptions-total', v, 1)) },
  { flag: '--max-lobby', env: 'TESSERA_MAX_LOBBY', help: `joiners one lobby holds (default ${DEFAULTS.maxLobbyPerRoom})`, apply: (c, v) => void (c.maxLobbyPerRoom = integer('--max-lobby', v, 1)) },
  { flag: '--max-lobby-total', env: 'TESSERA_MAX_LOBBY_TOTAL', help: `joiners all lobbies hold (default ${DEFAULTS.maxLobbyTotal})`, apply: (c, v) => void (c.maxLobbyTotal = integer('--max-lobby-total', v, 1)) },
  { flag: '--max-lobby-ttl', env: 'TESSERA_MAX_LOBBY_TTL', help: `longest lobby wait, seconds; larger ttls are clamped (default ${DEFAULTS.maxLobbyTtl})`, apply: (c, v) => void (c.maxLobbyTtl = Math.min(MAX_TIMER_SECONDS, integer('--max-lobby-ttl', v, 1))) },
  { flag: '--lobby-cooldown', env: 'TESSERA_LOBBY_COOLDOWN', help: `seconds a denied joiner waits before asking again (default ${DEFAULTS.lobbyCooldownSec})`, apply: (c, v) => void (c.lobbyCooldownSec = integer('--lobby-cooldown', v, 0)) },
  { flag: '--http-sockets-per-address', env: 'TESSERA_HTTP_SOCKETS_PER_ADDRESS', help: `plain HTTP sockets one client address may have open at once (of 1,024 for all), 0 for no share (default ${DEFAULTS.httpSocketsPerAddress})`, apply: (c, v) => void (c.httpSocketsPerAddress = integer('--http-sockets-per-address', v, 0)) },
  { flag: '--downloads-per-address', env: 'TESSERA_DOWNLOADS_PER_ADDRESS', help: `downloads one client address may have at once in each pool, 0 for no share (default ${DEFAULTS.downloadsPerAddress})`, apply: (c, v) => void (c.downloadsPerAddress = integer('--downloads-per-address', v, 0)) },
  { flag: '--download-min-rate', env: 'TESSERA_DOWNLOAD_MIN_RATE', help: `bytes/s a download must average after the HTTP idle time, or it is cut (default ${DEFAULTS.downloadMinRate})`, apply: (c, v) => void (c.downloadMinRate = integer('--download-min-rate', v, 1024)) },
  { flag: '--domain-history-bytes', env: 'TESSERA_DOMAIN_HISTORY_BYTES', help: `bytes of history in all rooms one project's domain-wide tokens opened (default ${DEFAULTS.domainHistoryBytes})`, apply: (c, v) => void (c.domainHistoryBytes = integer('--domain-history-bytes', v, 0)) },
  { flag: '--domain-data-byte-rate', env: 'TESSERA_DOMAIN_DATA_BYTE_RATE', help: `data bytes/s of all members of one project that joined with domain-wide tokens, twice that in a burst (default ${DEFAULTS.domainDataByteRate})`, apply: (c, v) => void (c.domainDataByteRate = integer('--domain-data-byte-rate', v, 1024)) },
  { flag: '--domain-subscriptions', env: 'TESSERA_DOMAIN_SUBSCRIPTIONS', help: `topic subscriptions of all members of one project's domain-wide tokens (default ${DEFAULTS.domainSubscriptions})`, apply: (c, v) => void (c.domainSubscriptions = integer('--domain-subscriptions', v, 1)) },
  { flag: '--domain-lobby', env: 'TESSERA_DOMAIN_LOBBY', help: `joiners with one project's domain-wide tokens in all lobbies (default ${DEFAULTS.domainLobby})`, apply: (c, v) => void (c.domainLobby = integer('--domain-lobby', v, 1)) },
  { flag: '--max-rooms-project', env: 'TESSERA_MAX_ROOMS_PROJECT', help: 'rooms one project\'s room-scoped tokens may have open (default: half of --max-rooms with several projects, all of it with one)', apply: (c, v) => void (c.maxRoomsPerProject = integer('--max-rooms-project', v, 1)) },
  { flag: '--max-domain-rooms', env: 'TESSERA_MAX_DOMAIN_ROOMS', help: `rooms per project that domain-wide tokens may open (default ${DEFAULTS.maxDomainRoomsPerProject})`, apply: (c, v) => void (c.maxDomainRoomsPerProject = integer('--max-domain-rooms', v, 0)) },
  { flag: '--max-ttl-admin', env: 'TESSERA_MAX_TTL_ADMIN', help: `largest exp-now of a server-API token, seconds (default ${DEFAULTS.maxTtlAdmin})`, apply: (c, v) => void (c.maxTtlAdmin = Math.min(3600, integer('--max-ttl-admin', v, 1))) },
  { flag: '--api-rate', env: 'TESSERA_API_RATE', help: `server-API requests per second per API key, twice that in a burst (default ${DEFAULTS.apiRate})`, apply: (c, v) => void (c.apiRate = integer('--api-rate', v, 1)) },
  { flag: '--webhook-url', env: 'TESSERA_WEBHOOK_URL', help: 'where webhooks go (http or https), for projects without a "webhookUrl" in the keys file; none by default', apply: (c, v) => void (c.webhookUrl = webhookUrl('--webhook-url', v)) },
  { flag: '--allow-private-webhooks', env: 'TESSERA_ALLOW_PRIVATE_WEBHOOKS', boolean: true, help: 'let webhooks go to loopback and private addresses (off by default)', apply: (c, v) => void (c.allowPrivateWebhooks = v === '1' || v === 'true') },
  { flag: '--media-ip', env: 'TESSERA_MEDIA_IP', help: 'address announced in ICE candidates (default: first non-internal IPv4, else 127.0.0.1)', apply: (c, v) => void (c.mediaIp = v) },
  {
    flag: '--log-level', env: 'TESSERA_LOG_LEVEL', help: `${LOG_LEVELS.join('|')} (default ${DEFAULTS.logLevel})`,
    apply: (c, v) => {
      if (!LOG_LEVELS.includes(v as LogLevel)) throw new Error(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
      c.logLevel = v as LogLevel;
    },
  },
];

/** Read the command line and the environment (flags win over variables). Throws on bad input. */
export function parseCli(argv: readonly string[], env: NodeJS.ProcessEnv): CliConfig {
  const config: CliConfig = { ...DEFAULTS, mediaIp: '', help: false, heapGrowthPercent: DEFAULT_HEAP_GROWTH_PERCENT };
  for (const flag of FLAGS) {
    const value = env[flag.env];
    // an empty (or blank) variable is unset, as a shell's `VAR=` means
    if (value !== undefined && value.trim() !== '') flag.apply(config, value);
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--help' || arg === '-h') {
      config.help = true;
      continue;
    }
    const [name, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const flag = FLAGS.find((f) => f.flag === name);
    if (!flag) throw new Error(`unknown option ${arg} (see --help)`);
    if (flag.boolean) {
      flag.apply(config, inline ?? 'true');
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new Error(`${name} needs a value`);
    flag.apply(config, value);
  }
  if (!config.mediaIp) config.mediaIp = defaultMediaIp();
  checkStorageDirs(config);
  return config;
}

/** The text of `--help`. */
export function helpText(): string {
  const lines = FLAGS.map((f) => `  ${`${f.flag}${f.boolean ? '' : ' VALUE'}`.padEnd(24)} ${f.help}\n  ${''.padEnd(24)} env ${f.env}`);
  return `Usage: tessera-relay [options]\n\nThe Tessera relay: verifies access tokens and enforces their grants.\n\nOptions:\n${lines.join('\n')}\n  --help                   this text\n\nSignals: SIGHUP re-reads the keys file; SIGTERM closes every session (server-shutdown) and exits 0.\n`;
}

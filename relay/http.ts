import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { bearer } from './api/auth.ts';
import { announcesBody } from './api/body.ts';
import { serveApi, statusOf } from './api/index.ts';
import { runHere, type ApiRunner } from './api/routes.ts';
import type { RelayContext } from './context.ts';
import { fromPeer, passToPeers, PEER_HEADER, recordingsEverywhere, type PeerFiles } from './http-peers.ts';
import { guardDrops } from './media/ice-guard.ts';
import { HLS_FILE } from './outputs/hls.ts';
import { recordingUrl } from './outputs/recording.ts';
import { isRecordingFile, listRecordingFiles, RECORDING_ID, recordingDir, RUN_ID, runDir, UnsafeStorageError } from './outputs/storage.ts';
import { downloadPool, sendFile, shareKey, type SendRefusals } from './send-file.ts';
import { wireError, type ErrorCode, type ErrorReason, type WireError } from '../src/protocol/codes.ts';
import { tokenKey } from './token/identity.ts';
import { verifyToken } from './token/verify.ts';

/** Longest request path (before `?`) the relay reads; the paths it serves are far shorter. */
const MAX_PATH = 2048;
const ALLOW = 'GET, HEAD';

type Headers = Record<string, string | number>;
/** A refusal: its status, and the body every HTTP refusal of the relay has, `{ error: { code, kind, message, reason } }` (as the server API's). */
type Refusal = { status: number; error: WireError; headers?: Headers };

const refusal = (status: number, code: ErrorCode, message: string, reason?: ErrorReason, headers?: Headers): Refusal => ({ status, error: wireError(code, message, reason), ...(headers ? { headers } : {}) });

function send(req: IncomingMessage, res: ServerResponse, status: number, type: string, body: string, headers: Headers = {}): void {
  res.writeHead(status, {
    'content-type': type,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    ...headers,
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}

const json = (req: IncomingMessage, res: ServerResponse, status: number, body: unknown, headers?: Headers) => send(req, res, status, 'application/json', JSON.stringify(body), headers);
/**
 * A refusal; a request that announced a body has its connection closed after the answer: kept
 * alive, Node would read and drop the whole body first, outside every budget.
 */
const refuse = (req: IncomingMessage, res: ServerResponse, r: Refusal) =>
  json(req, res, r.status, { error: r.error }, announcesBody(req) ? { ...r.headers, connection: 'close' } : r.headers);
const notFound = (req: IncomingMessage, res: ServerResponse) => refuse(req, res, refusal(404, 'NOT_FOUND', 'not found'));
const refusals = (req: IncomingMessage, res: ServerResponse): SendRefusals => ({
  notFound: () => notFound(req, res),
  busy: (message) => refuse(req, res, refusal(503, 'RATE_LIMITED', message, 'downloads-full', { 'retry-after': 1 })),
});

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Percent-decode one path segment: `null` for a bad escape (`%`, `%zz`) or bytes that are not
 * UTF-8. Characters of the raw target up to U+00FF are its bytes (Node reads it as latin1).
 */
export function percentDecode(segment: string): string | null {
  if (!segment.includes('%') && !/[^\x00-\x7f]/.test(segment)) return segment;
  const bytes: number[] = [];
  for (let i = 0; i < segment.length; i++) {
    const c = segment.charCodeAt(i);
    if (c === 0x25) {
      const hex = segment.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return null;
      bytes.push(Number.parseInt(hex, 16));
      i += 2;
    } else if (c <= 0xff) bytes.push(c);
    else bytes.push(...Buffer.from(segment[i]!, 'utf8'));
  }
  try {
    return utf8.decode(new Uint8Array(bytes));
  } catch {
    return null;
  }
}

/**
 * The decoded path segments of a request target, or why it is refused. Only origin-form
 * (`/path?query`) is served: absolute-form, `*`, empty segments (`//`) and bad escapes are 400.
 * `/` is `[]`. The query and anything after `#` are ignored.
 */
export function parseTarget(target: string | undefined): { segments: string[] } | Refusal {
  if (typeof target !== 'string' || !target.startsWith('/')) return refusal(400, 'INVALID_ARGUMENT', 'the request target must be a path starting with /', 'bad-url');
  let end = target.length;
  for (const mark of ['?', '#']) {
    const at = target.indexOf(mark);
    if (at >= 0 && at < end) end = at;
  }
  if (end > MAX_PATH) return refusal(414, 'INVALID_ARGUMENT', `the path is longer than ${MAX_PATH} characters`, 'bad-url');
  if (end === 1) return { segments: [] };
  const segments: string[] = [];
  for (const raw of target.slice(1, end).split('/')) {
    if (raw === '') return refusal(400, 'INVALID_ARGUMENT', 'the path has an empty segment', 'bad-url');
    const segment = percentDecode(raw);
    if (segment === null) return refusal(400, 'INVALID_ARGUMENT', 'the path has a bad percent-escape', 'bad-url');
    segments.push(segment);
  }
  return { segments };
}

/** On a cluster: the other nodes, and whether this request may be passed to them (not if a node passed it here). */
/**
 * The other nodes' files (on a cluster): `pass`, whether this request may be passed on to them;
 * `proven`, whether a node passed it here (it then has no client's share of download places).
 */
type Peers = { files: PeerFiles; pass: boolean; proven: boolean } | null;
type Handler = (req: IncomingMessage, res: ServerResponse, relay: RelayContext, connections: number, peers: Peers) => void | Promise<void>;

/** The handler of a path the relay serves, or `null` (not ours: the WebSocket hint). */
function route(segments: readonly string[]): Handler | null {
  const [first, ...rest] = segments;
  if (first === 'healthz' && rest.length === 0) return (req, res, relay, connections) => json(req, res, 200, { ok: true, rooms: relay.rooms.size, connections });
  if (first === 'metrics' && rest.length === 0) return serveMetrics;
  if (first === 'recordings') {
    if (rest.length === 0) return listRecordings;
    if (rest.length === 2) return (req, res, relay, _, peers) => downloadRecording(req, res, relay, peers, rest[0]!, rest[1]!);
    return notFound;
  }
  if (first === 'hls') return rest.length === 2 ? (req, res, relay, _, peers) => serveHls(req, res, relay, peers, rest[0]!, rest[1]!) : notFound;
  return null;
}

/**
 * The relay's HTTP side: `/healthz`, `/metrics`, `/recordings`, `/hls`, and the server API
 * under `/api` (`api/index.ts`). Total: any method,
 * target and header gets an answer (400 for targets that are not paths, 405 with `Allow` for a
 * wrong method, 404 under a known prefix), never a throw. Returns false for paths it does not
 * serve, which the caller answers. On a cluster, `peers` reaches the files other nodes wrote.
 */
export function serveHttp(req: IncomingMessage, res: ServerResponse, relay: RelayContext, connections: number, api: ApiRunner = runHere, peers: PeerFiles | null = null): boolean {
  try {
    const target = parseTarget(req.url);
    if (!('segments' in target)) {
      refuse(req, res, target);
      return true;
    }
    if (target.segments[0] === 'api') {
      serveApi(req, res, relay, target.segments.slice(1), api);
      return true;
    }
    // nothing outside the API takes a body: one announced is refused unread (a GET with an endless
    // body of one-byte chunks held the event loop for hundreds of milliseconds, from no token)
    if (announcesBody(req)) {
      refuse(req, res, refusal(400, 'INVALID_ARGUMENT', 'this request takes no body', 'bad-body'));
      return true;
    }
    const handler = route(target.segments);
    if (!handler) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      refuse(req, res, refusal(405, 'INVALID_ARGUMENT', 'only GET and HEAD', 'method-not-allowed', { allow: ALLOW }));
      return true;
    }
    // a request another node passed here is answered from this node's files only; and so is one
    // whose proof does not hold (the nodes' keys differed for a moment: passed on again, one
    // listing went round three nodes 679 times), served as a client's
    const done = handler(req, res, relay, connections, peers && { files: peers, pass: req.headers[PEER_HEADER] === undefined, proven: fromPeer(req, peers.peerKey) });
    if (done) done.catch((err: unknown) => failed(req, res, relay, err));
  } catch (err) {
    failed(req, res, relay, err);
  }
  return true;
}

/** The last line: log, answer 500 if nothing was sent yet, else cut the response. */
function failed(req: IncomingMessage, res: ServerResponse, relay: RelayContext, err: unknown): void {
  const unsafe = err instanceof UnsafeStorageError;
  relay.log.error(unsafe ? 'storage refused' : 'http request failed', { method: req.method, target: req.url, error: err instanceof Error ? err.message : String(err) });
  if (res.headersSent) {
    res.destroy();
    return;
  }
  try {
    refuse(req, res, unsafe ? refusal(500, 'INTERNAL_ERROR', 'the relay cannot read its storage (see its log)', 'unsafe-storage') : refusal(500, 'INTERNAL_ERROR', 'the relay could not complete this request', 'internal'));
  } catch {
    res.destroy();
  }
}

/**
 * Recordings are private to their room: a request carries a token (`Authorization: Bearer
 * <token>`) of the room, with `canRecord`, that enters directly (a joiner who must ask, or was
 * denied, downloads nothing) and was not removed from the room (on a cluster, at any node); it
 * sees exactly its project's room.
 */
async function recordingAccess(req: IncomingMessage, relay: RelayContext, peers: Peers): Promise<{ project: string; roomId: string; tokenKey: string } | Refusal> {
  const token = bearer(req);
  const unauthorized = { 'www-authenticate': 'Bearer' };
  if (token === null) return refusal(401, 'INVALID_TOKEN', 'send Authorization: Bearer <token>', 'missing', unauthorized);
  const { config } = relay;
  const verified = verifyToken(token, { keys: relay.keys, maxTtlRoom: config.maxTtlRoom, maxTtlDomain: config.maxTtlDomain, leeway: config.tokenLeeway });
  if (!verified.ok) {
    const error = wireError(verified.code, verified.message, verified.reason);
    const status = statusOf(error);
    return { status, error, ...(status === 401 ? { headers: unauthorized } : {}) };
  }
  const { claims, project } = verified;
  if (claims.roomId === undefined) return refusal(403, 'INVALID_PERMISSIONS', 'recordings are read with a room-scoped token (with canRecord): a domain-wide token reads no room');
  if (claims.grant.canRecord !== true) return refusal(403, 'INVALID_PERMISSIONS', 'needs a room-scoped token with canRecord', 'missing-canRecord');
  if (claims.joinPolicy?.mode === 'ask') return refusal(403, 'INVALID_PERMISSIONS', "a token that asks to enter (joinPolicy 'ask') cannot read recordings");
  const key = tokenKey(token, claims);
  const now = Date.now() / 1000;
  const bannedElsewhere = peers ? await peers.files.banned(project, claims.roomId, key, now).catch(() => null) : false;
  if (bannedElsewhere === null) return refusal(503, 'CONNECTION_FAILED', "the cluster's removals cannot be read now: try again", 'unreachable', { 'retry-after': 1 });
  if (relay.bans.has(project, claims.roomId, key, now) || bannedElsewhere) return refusal(403, 'UNAUTHORIZED_PARTICIPANT', 'this token was removed from the room', 'removed');
  return { project, roomId: claims.roomId, tokenKey: key };
}

/**
 * `GET /recordings`: the room's files, here and (on a cluster) at the other nodes. Asked while
 * the token's listing budget (`relay.budgets.listings`) is in debt it is refused `RATE_LIMITED` (`byte-rate`) before any
 * directory is read; else the listing (bounded: `LISTING_LIMITS`) is made and its bytes spent,
 * into debt if it is larger than what is left (a listing larger than the burst stays readable).
 */
async function listRecordings(req: IncomingMessage, res: ServerResponse, relay: RelayContext, _connections: number, peers: Peers): Promise<void> {
  const access = await recordingAccess(req, relay, peers);
  if ('status' in access) return refuse(req, res, access);
  const budget = relay.budgets.listings.get(`${access.project}\u0000${access.tokenKey}`);
  if (!budget.hasCredit()) {
    const { dataByteRate, dataByteBurst } = relay.config;
    const wait = Math.max(1, Math.ceil(budget.msUntilToken(0) / 1000));
    return refuse(req, res, refusal(429, 'RATE_LIMITED', `listings of recordings are paid at most ${dataByteRate} bytes per second per token (burst ${dataByteBurst}): try again in ${wait} s`, 'byte-rate', { 'retry-after': wait }));
  }
  const here = await listRecordingFiles(relay.config.recordingsDir, access.project, access.roomId);
  const { files, truncated, unreachable } = peers?.pass ? await recordingsEverywhere(here, peers.files, req.headers.authorization) : { ...here, unreachable: 0 };
  const body = JSON.stringify({ recordings: files.map((f) => ({ ...f, url: recordingUrl(f.recording, f.file) })), ...(truncated ? { truncated } : {}), ...(unreachable > 0 ? { unreachable } : {}) });
  budget.spend(Buffer.byteLength(body));
  send(req, res, 200, 'application/json', body);
}

async function downloadRecording(req: IncomingMessage, res: ServerResponse, relay: RelayContext, peers: Peers, id: string, file: string): Promise<void> {
  const access = await recordingAccess(req, relay, peers);
  if ('status' in access) return refuse(req, res, access);
  if (!RECORDING_ID.test(id) || !isRecordingFile(file)) return notFound(req, res);
  const dir = await recordingDir(relay.config.recordingsDir, access.project, access.roomId, id);
  if (dir === null) {
    if (peers?.pass && (await passToPeers(req, res, peers.files, { kind: 'recording', project: access.project, roomId: access.roomId, id }, recordingUrl(id, encodeURIComponent(file)), clientShare(req, relay)))) return;
    return notFound(req, res);
  }
  const type = file.endsWith('.webm') ? 'video/webm' : file.endsWith('.mp4') ? 'video/mp4' : 'application/x-ndjson';
  await sendFile(req, res, relay, join(dir, file), { 'content-type': type, 'cache-control': 'private, no-store' }, downloadPool(relay, 'recordings'), refusals(req, res), peers?.proven === true, `${access.project}\u0000${access.roomId}`);
}

/** The client's share of downloads passed to other nodes: as many as it may have here. */
const clientShare = (req: IncomingMessage, relay: RelayContext) => ({ key: shareKey(req.socket.remoteAddress, false) ?? '', max: relay.config.downloadsPerAddress });

/** HLS is public by design (an audience outside the room, CDNs): the unguessable run id is the key. */
async function serveHls(req: IncomingMessage, res: ServerResponse, relay: RelayContext, peers: Peers, run: string, file: string): Promise<void> {
  if (!RUN_ID.test(run) || !HLS_FILE.test(file)) return notFound(req, res);
  const dir = await runDir(relay.config.hlsDir, run);
  if (dir === null) {
    if (peers?.pass && (await passToPeers(req, res, peers.files, { kind: 'hls', id: run }, `/hls/${run}/${encodeURIComponent(file)}`, clientShare(req, relay)))) return;
    return notFound(req, res);
  }
  const type = file.endsWith('.m3u8') ? 'application/vnd.apple.mpegurl' : file.endsWith('.ts') ? 'video/mp2t' : 'text/vtt';
  await sendFile(req, res, relay, join(dir, file), { 'content-type': type, 'cache-control': 'no-cache', 'access-control-allow-origin': '*' }, downloadPool(relay, 'hls'), refusals(req, res), peers?.proven === true);
}

/** True for a listen address only this machine can reach. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || /^::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/**
 * `/metrics`: with `--metrics-token`, only for `Authorization: Bearer <that token>` (compared in
 * constant time); without it, only when the relay listens on loopback.
 */
function serveMetrics(req: IncomingMessage, res: ServerResponse, relay: RelayContext, connections: number): void {
  const expected = relay.config.metricsToken;
  if (expected) {
    const given = bearer(req);
    if (given === null || !timingSafeEqual(digest(given), digest(expected))) {
      return refuse(req, res, refusal(401, 'INVALID_TOKEN', 'metrics need Authorization: Bearer <the --metrics-token>', given === null ? 'missing' : 'bad-signature', { 'www-authenticate': 'Bearer' }));
    }
  } else if (!isLoopback(relay.config.host)) {
    return refuse(req, res, refusal(403, 'INVALID_PERMISSIONS', 'metrics are off: this relay listens beyond loopback and has no --metrics-token; set one to read them'));
  }
  send(req, res, 200, 'text/plain; version=0.0.4', metrics(relay, connections));
}

/** Prometheus text: the relay now (rooms, people, media) and since start (joins, refusals). */
function metrics(relay: RelayContext, connections: number): string {
  let speakers = 0;
  let viewers = 0;
  let waiting = 0;
  const media = { publications: 0, subscriptions: 0, inPackets: 0, inBytes: 0, outPackets: 0, outBytes: 0, nacks: 0, keyFrames: 0 };
  for (const room of relay.rooms) {
    const c = room.counts();
    speakers += c.speaker;
    viewers += c.viewer;
    waiting += room.lobby.size;
    const m = room.media.stats();
    media.publications += m.publications;
    media.subscriptions += m.subscriptions;
    media.inPackets += m.in.packets;
    media.inBytes += m.in.bytes;
    media.outPackets += m.out.packets;
    media.outBytes += m.out.bytes;
    media.nacks += m.in.nacks + m.out.nacks;
    media.keyFrames += m.in.keyFrameRequests;
  }
  const lines: string[] = [];
  const metric = (name: string, type: 'gauge' | 'counter', help: string, samples: Array<[string, number]>) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) lines.push(`${name}${labels} ${value}`);
  };
  metric('tessera_connections', 'gauge', 'Open WebSocket connections, joined or not.', [['', connections]]);
  metric('tessera_rooms', 'gauge', 'Rooms with members or waiting joiners.', [['', relay.rooms.size]]);
  metric('tessera_participants', 'gauge', 'Participants in rooms, by tier.', [['{tier="speaker"}', speakers], ['{tier="viewer"}', viewers]]);
  metric('tessera_lobby_waiting', 'gauge', 'Joiners waiting in lobbies.', [['', waiting]]);
  metric('tessera_seats_away', 'gauge', 'Participants away on their resume grace period (at most --max-connections).', [['', relay.seats.away]]);
  metric('tessera_joins_total', 'counter', 'Joins accepted since start.', [['', relay.counters.joins]]);
  metric('tessera_join_refusals_total', 'counter', 'Joins refused since start, by code.', [...relay.counters.refusals].map(([code, n]) => [`{code="${code}"}`, n] as [string, number]));
  metric('tessera_optional_frames_dropped_total', 'counter', 'Optional frames (pubsub, whiteboard) not sent to members over their soft send limit.', [['', relay.counters.dropped]]);
  metric('tessera_connections_cut_total', 'counter', 'Connections cut for being slow, flooding, or over the relay-wide send budget.', [['', relay.counters.cut]]);
  metric('tessera_faults_total', 'counter', 'Faults of the relay itself: frames whose handling threw, and (under the tessera-relay command) promises nobody handled; each logged at error. Should stay 0.', [['', relay.counters.faults]]);
  const hooks = relay.counters.webhooks;
  metric('tessera_webhooks_total', 'counter', 'Webhook events by outcome: delivered, failed (given up after their attempts), dropped (their queue was full).', [['{outcome="delivered"}', hooks.stats.delivered], ['{outcome="failed"}', hooks.stats.failed], ['{outcome="dropped"}', hooks.stats.dropped]]);
  metric('tessera_webhooks_queued', 'gauge', 'Webhook events waiting to be delivered.', [['', hooks.queued]]);
  // the budgets that are one relay-wide quantity (the others are per token, per project or per room)
  const budgets = Object.entries(relay.budgets as object).filter((e): e is [string, { inUse: number; limit: number }] => typeof e[1]?.inUse === 'number' && typeof e[1]?.limit === 'number');
  metric('tessera_budget_in_use', 'gauge', 'What members make the relay hold, relay-wide, by budget (history and whiteboard in bytes).', budgets.map(([name, b]) => [`{budget="${name}"}`, b.inUse] as [string, number]));
  metric('tessera_budget_limit', 'gauge', 'The relay-wide ceiling of each budget.', budgets.map(([name, b]) => [`{budget="${name}"}`, b.limit] as [string, number]));
  const arena = relay.budgets.arena;
  metric('tessera_arena_bytes', 'gauge', 'Memory pubsub history and whiteboard shapes are kept in: allocated (its high-water mark, reused: at most 5/4 of their budgets, plus a slab of 1 MiB per size class) and in use.', [['{state="allocated"}', arena.slabBytes], ['{state="in-use"}', arena.bytesInUse]]);
  metric('tessera_media_publications', 'gauge', 'Published tracks.', [['', media.publications]]);
  metric('tessera_media_subscriptions', 'gauge', 'Track subscriptions.', [['', media.subscriptions]]);
  metric('tessera_media_packets', 'gauge', 'RTP packets through the live transports, by direction.', [['{direction="in"}', media.inPackets], ['{direction="out"}', media.outPackets]]);
  metric('tessera_media_bytes', 'gauge', 'RTP payload bytes through the live transports, by direction.', [['{direction="in"}', media.inBytes], ['{direction="out"}', media.outBytes]]);
  metric('tessera_media_nacks', 'gauge', 'NACKs on the live transports.', [['', media.nacks]]);
  metric('tessera_media_key_frame_requests', 'gauge', 'Key frames asked of publishers on the live transports.', [['', media.keyFrames]]);
  metric('tessera_media_datagrams_dropped_total', 'counter', 'UDP datagrams to the media ports dropped before werift read them (this process), by why: unproven (a request not signed for its transport, or anything else from an address that never sent one), malformed, rate (DTLS over its rate).', Object.entries(guardDrops).map(([why, n]) => [`{why="${why}"}`, n] as [string, number]));
  return `${lines.join('\n')}\n`;
}

import { createReadStream, existsSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { RelayContext } from './context.ts';
import { listRecordings, safeName } from './outputs/recording.ts';
import { verifyToken } from './token/verify.ts';

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
};

function sendFile(res: ServerResponse, file: string, type: string): void {
  if (!existsSync(file) || !statSync(file).isFile()) return json(res, 404, { error: 'not found' });
  res.writeHead(200, { 'content-type': type, 'cache-control': 'no-cache', 'access-control-allow-origin': '*' });
  createReadStream(file).pipe(res);
}

/**
 * Recordings are private: a request carries a token (`Authorization: Bearer <token>`) scoped
 * to the room, with `canRecord`; it sees that room's recordings only.
 */
function recordingAccess(req: IncomingMessage, relay: RelayContext): { roomId: string } | { status: number; error: string } {
  const header = req.headers.authorization ?? '';
  const token = header.startsWith('Bearer ') ? header.slice(7) : '';
  const verified = verifyToken(token, { keys: relay.keys, maxTtlRoom: relay.config.maxTtlRoom, maxTtlDomain: relay.config.maxTtlDomain });
  if (!verified.ok) return { status: 401, error: `${verified.code}: ${verified.message}` };
  const { claims } = verified;
  if (claims.roomId === undefined || claims.grant.canRecord !== true) return { status: 403, error: 'INVALID_PERMISSIONS: needs a room-scoped token with canRecord' };
  return { roomId: claims.roomId };
}

/** The relay's HTTP side: health, recordings, HLS. Returns false for paths it does not serve. */
export function serveHttp(req: IncomingMessage, res: ServerResponse, relay: RelayContext, connections: number): boolean {
  const path = new URL(req.url ?? '/', 'http://relay').pathname;
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  if (path === '/healthz') {
    json(res, 200, { ok: true, rooms: relay.rooms.size, connections });
    return true;
  }
  if (path === '/metrics') {
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4', 'cache-control': 'no-store' });
    res.end(metrics(relay, connections));
    return true;
  }
  if (path === '/recordings' || path.startsWith('/recordings/')) {
    const access = recordingAccess(req, relay);
    if ('status' in access) {
      json(res, access.status, { error: access.error });
      return true;
    }
    const dir = relay.config.recordingsDir;
    if (path === '/recordings') {
      json(res, 200, { recordings: listRecordings(dir, access.roomId).map((r) => ({ ...r, url: `/recordings/${encodeURIComponent(r.file)}` })) });
      return true;
    }
    const file = decodeURIComponent(path.slice('/recordings/'.length));
    if (!/^[\w-]+--[\w-]+(--[\w-]+)?\.(jsonl|webm)$/.test(file) || !file.startsWith(`${safeName(access.roomId)}--`)) {
      json(res, 404, { error: 'not found' });
      return true;
    }
    sendFile(res, join(dir, file), file.endsWith('.webm') ? 'video/webm' : 'application/x-ndjson');
    return true;
  }
  const hls = /^\/hls\/([\w-]+)\/(index\.m3u8|seg\d+\.vtt)$/.exec(path);
  if (hls) {
    const [, room, file] = hls as unknown as [string, string, string];
    sendFile(res, join(relay.config.hlsDir, room, file), file.endsWith('.m3u8') ? 'application/vnd.apple.mpegurl' : 'text/vtt');
    return true;
  }
  return false;
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
  metric('tessera_joins_total', 'counter', 'Joins accepted since start.', [['', relay.counters.joins]]);
  metric('tessera_join_refusals_total', 'counter', 'Joins refused since start, by code.', [...relay.counters.refusals].map(([code, n]) => [`{code="${code}"}`, n] as [string, number]));
  metric('tessera_media_publications', 'gauge', 'Published tracks.', [['', media.publications]]);
  metric('tessera_media_subscriptions', 'gauge', 'Track subscriptions.', [['', media.subscriptions]]);
  metric('tessera_media_packets', 'gauge', 'RTP packets through the live transports, by direction.', [['{direction="in"}', media.inPackets], ['{direction="out"}', media.outPackets]]);
  metric('tessera_media_bytes', 'gauge', 'RTP payload bytes through the live transports, by direction.', [['{direction="in"}', media.inBytes], ['{direction="out"}', media.outBytes]]);
  metric('tessera_media_nacks', 'gauge', 'NACKs on the live transports.', [['', media.nacks]]);
  metric('tessera_media_key_frame_requests', 'gauge', 'Key frames asked of publishers on the live transports.', [['', media.keyFrames]]);
  return `${lines.join('\n')}\n`;
}

// The moderation dashboard's backend: the relay's server API through `RoomService`, and the
// relay's webhooks through `WebhookReceiver` (this token server is the demo's webhook receiver:
// `npm start` points the relay's --webhook-url at POST /api/webhooks). The dashboard is the
// project's operator console, over every room: each route needs a login that is an operator's
// (`sessionOf(req).operator`), not merely a moderator of some room, as the token server's own
// recordings routes need (the demo's one password makes everyone an operator).
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { RoomService, WebhookReceiver } from 'tessera/server';

/** Webhook events the dashboard keeps, newest last. */
const MAX_EVENTS = 200;
const MAX_WEBHOOK_BODY = 64 * 1024;
const ROOM = /^[\w-]{1,64}$/;
/**
 * A file of a recordings listing, `/recordings/<id>/<file>`. No segment starts with a dot: fetch
 * resolves `..` and `.`, and `/recordings/../metrics` would ask the relay's other routes.
 */
export const RECORDING_PATH = /^\/recordings\/[\w~-][\w.~-]*\/[\w~-][\w.~-]*$/;

/**
 * Pass a file of the relay to the browser at the browser's pace: the relay's answer is read only
 * as fast as the browser takes it, and dropped when the browser goes. (Written chunk by chunk
 * without waiting, a client that asked and never read made this server hold the whole file:
 * 200 MiB a request.)
 * @param {import('node:http').ServerResponse} res
 * @param {string} url the file at the relay
 * @param {string} token a token that may read it
 * @param {string} filename the name the browser saves it under
 * @param {Function} send answers JSON (an error before any byte of the file)
 */
export async function passDownload(res, url, token, filename, send) {
  const abort = new AbortController();
  const gone = () => abort.abort();
  res.once('close', gone);
  try {
    const answer = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: abort.signal });
    if (!answer.ok || !answer.body) {
      await answer.body?.cancel();
      return send(res, answer.status, { error: 'not found' });
    }
    res.writeHead(200, { 'content-type': answer.headers.get('content-type') ?? 'application/octet-stream', 'content-disposition': `attachment; filename="${filename}"` });
    await pipeline(Readable.fromWeb(answer.body), res);
  } catch {
    // the relay could not be reached, or one side went away mid-file
    if (!res.headersSent && !res.destroyed) send(res, 502, { error: 'the relay did not answer' });
    else res.destroy();
  } finally {
    res.off('close', gone);
  }
}

/**
 * The dashboard's routes, to merge into the token server's table.
 * @param {{ relayUrl: string, apiKey: string, secret: string, sessionOf: (req) => object | undefined, send: Function, readJson: Function, recordToken: (room: string) => string }} deps
 */
export function dashboardRoutes({ relayUrl, apiKey, secret, sessionOf, send, readJson, recordToken }) {
  const service = new RoomService({ url: relayUrl, apiKey, secret });
  const receiver = new WebhookReceiver({ apiKey, secret });
  const relayHttp = relayUrl.replace(/^ws/, 'http');
  const events = [];
  let received = 0;

  // a route that needs an operator's login; SdkErrors of the relay go back as they are
  const loggedIn = (handler) => async (req, res, query) => {
    const session = sessionOf(req);
    if (!session) return send(res, 401, { error: 'log in first' });
    if (session.operator !== true) return send(res, 403, { error: 'the dashboard is for the project\'s operators' });
    try {
      await handler(req, res, query);
    } catch (err) {
      if (err?.name !== 'SdkError') throw err;
      send(res, err.code === 'NOT_FOUND' ? 404 : 400, { error: err.message, code: err.code, reason: err.reason });
    }
  };
  const roomOf = (value) => (typeof value === 'string' && ROOM.test(value) ? value : null);

  return {
    // the relay's webhooks: verified (signature, expiry, key, body hash) before anything is kept
    'POST /api/webhooks': async (req, res) => {
      const chunks = [];
      let size = 0;
      for await (const chunk of req) {
        size += chunk.length;
        if (size > MAX_WEBHOOK_BODY) return send(res, 413, { error: 'too large' });
        chunks.push(chunk);
      }
      let event;
      try {
        event = receiver.receive(Buffer.concat(chunks), req.headers.authorization);
      } catch (err) {
        // a newer relay's kind of event is genuine: taken (else the relay retries it), not listed
        if (err.reason === 'unknown-event') return res.writeHead(204).end();
        return send(res, 401, { error: err.message, reason: err.reason });
      }
      // a retried delivery keeps its id: keep each event once
      if (!events.some((e) => e.id === event.id)) {
        events.push({ ...event, seq: ++received });
        if (events.length > MAX_EVENTS) events.shift();
      }
      res.writeHead(204).end();
    },
    'GET /api/dashboard/events': loggedIn(async (req, res, query) => {
      const after = Number(query.get('after') ?? 0);
      send(res, 200, { events: events.filter((e) => e.seq > after), last: received });
    }),
    'GET /api/dashboard/rooms': loggedIn(async (req, res, query) => {
      send(res, 200, await service.listRooms({ limit: 50, cursor: query.get('cursor') }));
    }),
    'GET /api/dashboard/participants': loggedIn(async (req, res, query) => {
      const room = roomOf(query.get('room'));
      if (!room) return send(res, 400, { error: 'room' });
      const tier = query.get('tier') === 'viewer' ? 'viewer' : 'speaker';
      send(res, 200, await service.listParticipants(room, { tier, limit: 10, cursor: query.get('cursor') }));
    }),
    'POST /api/dashboard/remove': loggedIn(async (req, res) => {
      const { room, participantId } = await readJson(req);
      if (!roomOf(room) || typeof participantId !== 'string' || !participantId) return send(res, 400, { error: 'room and participantId' });
      await service.removeParticipant(room, participantId);
      send(res, 200, {});
    }),
    'POST /api/dashboard/end': loggedIn(async (req, res) => {
      const { room } = await readJson(req);
      if (!roomOf(room)) return send(res, 400, { error: 'room' });
      await service.endRoom(room);
      send(res, 200, {});
    }),
    // a room's recordings, asked of the relay with a short canRecord token minted here
    'GET /api/dashboard/recordings': loggedIn(async (req, res, query) => {
      const room = roomOf(query.get('room'));
      if (!room) return send(res, 400, { error: 'room' });
      const answer = await fetch(`${relayHttp}/recordings`, { headers: { authorization: `Bearer ${recordToken(room)}` } });
      const { recordings = [] } = await answer.json();
      send(res, answer.status, { recordings: recordings.map((r) => ({ ...r, url: `/api/dashboard/recording?room=${encodeURIComponent(room)}&path=${encodeURIComponent(r.url)}` })) });
    }),
    'GET /api/dashboard/recording': loggedIn(async (req, res, query) => {
      const room = roomOf(query.get('room'));
      const path = query.get('path') ?? '';
      if (!room || !RECORDING_PATH.test(path)) return send(res, 400, { error: 'room and a path of the listing' });
      await passDownload(res, `${relayHttp}${path}`, recordToken(room), path.split('/').slice(-2).join('-'), send);
    }),
  };
}

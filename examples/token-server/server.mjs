// A small integrator backend: its own toy login, a route that mints Tessera tokens with
// `tessera/server`, and a moderation dashboard (dashboard.mjs: the relay's server API and its
// webhooks). The API secret lives here and only here; browsers get tokens, never it.
//
//   TESSERA_API_KEY=... TESSERA_API_SECRET=... TESSERA_RELAY_URL=ws://127.0.0.1:7880 node server.mjs
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize } from 'node:path';
import { mintToken } from 'tessera/server';
import { dashboardRoutes, passDownload, RECORDING_PATH } from './dashboard.mjs';

const API_KEY = process.env.TESSERA_API_KEY;
const API_SECRET = process.env.TESSERA_API_SECRET;
const RELAY_URL = process.env.TESSERA_RELAY_URL ?? 'ws://127.0.0.1:7880';
// where the demo's livestream pushes (npm start runs a local nginx RTMP server when it can)
const DEMO_RTMP = process.env.TESSERA_DEMO_RTMP ?? null;
const PORT = Number(process.env.PORT ?? 8080);
const HOST = process.env.HOST ?? '127.0.0.1';
// The toy login: any name with this password. A real backend uses its own accounts.
const PASSWORD = process.env.DEMO_PASSWORD ?? 'tessera';
if (!API_KEY || !API_SECRET) {
  console.error('token-server: set TESSERA_API_KEY and TESSERA_API_SECRET (the keys the relay uses)');
  process.exit(2);
}

const ROOT = new URL('../..', import.meta.url).pathname;
const STATIC = ['/dist/', '/examples/'];
// /dist/ is the SDK package's build
const onDisk = (path) => join(ROOT, path.startsWith('/dist/') ? `packages/tessera${path}` : path);
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css', '.map': 'application/json', '.svg': 'image/svg+xml' };

/** Roles of the demo, each a grant (and a tier) — the only place grants are decided. */
const ROLES = {
  speaker: { grant: { canPublish: true, canSubscribe: true, canPublishData: true } },
  // the audience may watch and chat; it is only counted, never rostered
  viewer: { grant: { canSubscribe: true, canPublishData: true }, isViewer: true },
  moderator: {
    grant: { canPublish: true, canSubscribe: true, canPublishData: true, canModerate: true, canRecord: true, canHls: true, canLivestream: true, canTranscribe: true, canWhiteboard: true },
  },
  // a speaker who must be let in by a moderator
  guest: { grant: { canPublish: true, canSubscribe: true, canPublishData: true }, joinPolicy: { mode: 'ask', ttl: 120 } },
};

const sessions = new Map(); // session id → { name, since, operator, moderates: Set of rooms it got a moderator token for }
// the toy login's sessions: a day each, the oldest going past 10,000 (a login loop cannot grow the process)
const SESSION_MS = 24 * 3600 * 1000;
const MAX_SESSIONS = 10_000;
// the Host names this server answers to: its own address and localhost, and those DEMO_HOSTS lists
// (a page of another site whose name was rebound to this address names its own host: refused)
let hosts = new Set();
const RELAY_HTTP = RELAY_URL.replace(/^ws/, 'http');

function send(res, status, body, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
}

async function readJson(req) {
  let size = 0;
  const chunks = [];
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 16 * 1024) throw new Error('body too large');
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
}

function sessionOf(req) {
  const match = /(?:^|;\s*)demo_session=([\w-]+)/.exec(req.headers.cookie ?? '');
  const session = match ? sessions.get(match[1]) : undefined;
  if (session && Date.now() - session.since > SESSION_MS) return void sessions.delete(match[1]);
  return session;
}

const sameSecret = (a, b) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

const routes = {
  'POST /api/login': async (req, res) => {
    const { name, password } = await readJson(req);
    if (typeof name !== 'string' || !name.trim() || name.length > 64) return send(res, 400, { error: 'name: 1 to 64 characters' });
    if (typeof password !== 'string' || !sameSecret(password, PASSWORD)) return send(res, 401, { error: 'wrong password' });
    const id = randomBytes(16).toString('base64url');
    // `operator`: may use the dashboard, which reads and ends every room of the project. In this
    // demo the one password makes everyone an operator; a real app decides it by its own roles
    sessions.set(id, { name: name.trim(), since: Date.now(), operator: true, moderates: new Set() });
    if (sessions.size > MAX_SESSIONS) sessions.delete(sessions.keys().next().value);
    send(res, 200, { name: name.trim() }, { 'set-cookie': `demo_session=${id}; HttpOnly; SameSite=Strict; Path=/` });
  },
  'POST /api/token': async (req, res) => {
    const session = sessionOf(req);
    if (!session) return send(res, 401, { error: 'log in first' });
    const { room, role } = await readJson(req);
    if (typeof room !== 'string' || !/^[\w-]{1,64}$/.test(room)) return send(res, 400, { error: 'room: letters, digits, - and _' });
    const spec = ROLES[role];
    if (!spec) return send(res, 400, { error: `role: one of ${Object.keys(ROLES).join(', ')}` });
    const token = mintToken({
      apiKey: API_KEY,
      secret: API_SECRET,
      roomId: room,
      // viewers share an audience identity scheme: each joiner gets a fresh id
      ...(spec.isViewer ? { isViewer: true } : { participantId: `${session.name.toLowerCase().replace(/[^\w-]/g, '-')}-${role}` }),
      ...(spec.joinPolicy ? { joinPolicy: spec.joinPolicy } : {}),
      grant: spec.grant,
      ttl: '2h',
    });
    if (role === 'moderator') session.moderates.add(room);
    send(res, 200, { token, url: RELAY_URL, name: session.name, rtmp: DEMO_RTMP });
  },
  // A room's recordings, for someone who moderates it: the relay is asked with a short
  // canRecord token minted here (the browser never holds one for downloads).
  'GET /api/recordings': async (req, res, query) => {
    const room = moderatedRoom(req, res, query);
    if (!room) return;
    const answer = await fetch(`${RELAY_HTTP}/recordings`, { headers: { authorization: `Bearer ${recordToken(room)}` } });
    const { recordings = [] } = await answer.json();
    send(res, answer.status, { recordings: recordings.map((r) => ({ ...r, url: `/api/recording?room=${encodeURIComponent(room)}&path=${encodeURIComponent(r.url)}` })) });
  },
  'GET /api/recording': async (req, res, query) => {
    const room = moderatedRoom(req, res, query);
    if (!room) return;
    const path = query.get('path') ?? '';
    if (!RECORDING_PATH.test(path)) return send(res, 400, { error: 'path: a recording file of the listing' });
    await passDownload(res, `${RELAY_HTTP}${path}`, recordToken(room), path.split('/').slice(-2).join('-'), send);
  },
};

Object.assign(routes, dashboardRoutes({ relayUrl: RELAY_URL, apiKey: API_KEY, secret: API_SECRET, sessionOf, send, readJson, recordToken: (room) => recordToken(room) }));

function moderatedRoom(req, res, query) {
  const session = sessionOf(req);
  const room = query.get('room') ?? '';
  if (!session) return void send(res, 401, { error: 'log in first' });
  if (!session.moderates.has(room)) return void send(res, 403, { error: 'only a moderator of the room may download its recordings' });
  return room;
}

const recordToken = (room) => mintToken({ apiKey: API_KEY, secret: API_SECRET, roomId: room, grant: { canRecord: true }, ttl: 60 });

/** The path and query of a request target, or null when it is not a plain path (never a throw). */
function target(req) {
  const raw = req.url ?? '';
  if (!raw.startsWith('/') || raw.startsWith('//')) return null;
  const at = raw.indexOf('?');
  let path;
  try {
    path = decodeURIComponent(at < 0 ? raw : raw.slice(0, at));
  } catch {
    return null;
  }
  return { path, query: new URLSearchParams(at < 0 ? '' : raw.slice(at + 1)) };
}

/** Files of packages the pages use, by the path they load them from. */
const VENDOR = { '/vendor/hls.min.js': 'node_modules/hls.js/dist/hls.min.js' };

function serveStatic(req, res, path) {
  path = normalize(path);
  if (Object.hasOwn(VENDOR, path)) {
    res.writeHead(200, { 'content-type': 'text/javascript' });
    return createReadStream(join(ROOT, VENDOR[path])).on('error', () => res.destroy()).pipe(res);
  }
  if (path === '/') path = '/examples/stage/';
  if (path.endsWith('/')) path += 'index.html';
  const file = onDisk(path);
  if (!STATIC.some((p) => path.startsWith(p)) || !file.startsWith(ROOT) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404, { 'content-type': 'text/plain' });
    return res.end('not found');
  }
  res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
  createReadStream(file).on('error', () => res.destroy()).pipe(res);
}

const server = createServer({ headersTimeout: 5000, requestTimeout: 10_000 }, async (req, res) => {
  if (!hosts.has((req.headers.host ?? '').toLowerCase())) return send(res, 421, { error: 'this server does not answer to that host name (list it in DEMO_HOSTS)' });
  const where = target(req);
  if (!where) return send(res, 400, { error: 'bad request target' });
  const route = routes[`${req.method} ${where.path}`];
  if (!route) return serveStatic(req, res, where.path);
  if (req.method === 'POST') {
    // the session cookie is SameSite=Strict, yet another origin of the same site (another port)
    // still sends it: a POST must be JSON (a form cannot send that without a CORS preflight) and
    // come from this origin when the browser says where it comes from
    if (!/^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? '')) return send(res, 415, { error: 'send Content-Type: application/json' });
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://${req.headers.host}` && origin !== `https://${req.headers.host}`) return send(res, 403, { error: 'cross-origin request' });
  }
  try {
    await route(req, res, where.query);
  } catch (err) {
    // mintToken refuses what the relay would refuse: say why
    if (!res.headersSent) send(res, 400, { error: err.message, code: err.code });
    else res.destroy();
  }
});

server.listen(PORT, HOST, () => {
  const { port } = server.address();
  const named = (process.env.DEMO_HOSTS ?? '').split(',').map((h) => h.trim().toLowerCase()).filter(Boolean);
  hosts = new Set([`${HOST}:${port}`, `127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, ...named, ...named.map((h) => `${h}:${port}`)]);
  console.log(`token-server listening on http://${HOST}:${port} (relay ${RELAY_URL})`);
});

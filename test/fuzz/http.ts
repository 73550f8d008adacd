/**
 * The HTTP fuzzer: generated request lines (methods, targets with random bytes, escapes, slashes,
 * absolute-form, `*`; the file routes and the server API's), headers (random names and values,
 * huge, duplicated, `Authorization` garbage and real tokens, content types) and bodies (bytes,
 * JSON of any shape, the API's fields, deep nesting), sent over raw TCP to a relay; after each batch `/healthz` must answer 200.
 * Also the raw-request helper of the HTTP tests.
 */
import fc from 'fast-check';
import { connect } from 'node:net';

/** What came back on a raw socket. */
export interface RawResponse {
  /** The status code, `null` if nothing parseable came back. */
  status: number | null;
  headers: Record<string, string>;
  body: Buffer;
}

function parse(bytes: Buffer): RawResponse {
  const end = bytes.indexOf('\r\n\r\n');
  if (end < 0) return { status: null, headers: {}, body: Buffer.alloc(0) };
  const [line, ...fields] = bytes.subarray(0, end).toString('latin1').split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(line ?? '');
  const headers: Record<string, string> = {};
  for (const field of fields) {
    const colon = field.indexOf(':');
    if (colon > 0) headers[field.slice(0, colon).trim().toLowerCase()] = field.slice(colon + 1).trim();
  }
  return { status: status ? Number(status[1]) : null, headers, body: bytes.subarray(end + 4) };
}

/**
 * Send raw bytes on a new TCP connection and collect the answer until the relay closes the
 * connection (send `Connection: close`), a complete response with `content-length` arrived, or
 * `ms` passed.
 */
export function rawHttp(port: number, request: string | Buffer, ms = 5000): Promise<RawResponse> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parse(Buffer.concat(chunks)));
    };
    const timer = setTimeout(finish, ms);
    socket.on('error', finish);
    socket.on('close', finish);
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      const got = parse(Buffer.concat(chunks));
      const length = Number(got.headers['content-length']);
      if (got.status !== null && Number.isFinite(length) && got.body.length >= length && !/^HEAD /.test(String(request))) finish();
    });
    socket.write(request);
  });
}

/** A GET request line and headers, as text (`Connection: close` added). */
export const request = (target: string, headers: Record<string, string> = {}, method = 'GET') =>
  `${method} ${target} HTTP/1.1\r\nHost: relay\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}Connection: close\r\n\r\n`;

// ---- generators ----------------------------------------------------------------------------------

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'M-SEARCH'];
const ODD_METHODS = ['CONNECT', 'PRI', 'get', 'FOO', '', 'GET GET', 'G\u0000T'];
const PIECES = ['/', '//', '.', '..', '%', '%2', '%2f', '%2F', '%00', '%zz', '%ff', '%c3%a9', '%e2%82', '%C3%28', '?', '#', '&', ';', '~', '_', '-', 'recordings', 'hls', 'healthz', 'metrics', 'index.m3u8', 'seg0.vtt', 'seg99999999999.vtt', 'timeline.jsonl', 'a--camera.webm', 'a--camera--2.webm', '2026-11-23T15-20-01Z-k3j9x2ab', '0123456789abcdef0123456789abcdef', 'api', 'v1', 'rooms', 'fuzz', 'participants', 'outputs', 'whiteboard', 'recording', 'start', 'stop', 'data', 'host', '?tier=viewer', '?limit=1000', '?cursor=', '?limit=-1'];
const ODD_PIECES = ['\u0000', ' ', '\t', 'é', '😀', '\ud800', '\r', '\n'];
const HEADER_NAMES = ['Authorization', 'authorization', 'Content-Type', 'Content-Length', 'Transfer-Encoding', 'Upgrade', 'Connection', 'Expect', 'Range', 'If-None-Match', 'If-Modified-Since', 'Accept-Encoding', 'Cookie', 'X-Forwarded-For', 'Sec-WebSocket-Key', 'Sec-WebSocket-Version', 'Origin'];
const TOKEN_CHARS = [...'abcXYZ-_019!#$%&*+.^`|~'];
const URL_CHARS = [...'abcxyzABC019-._~%/?#=&+:@!$'];

/** A request target; `odd` adds bytes that are not valid in a request line. */
function target(known: readonly string[], odd: boolean): fc.Arbitrary<Buffer> {
  const piece = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...PIECES, ...known) },
    { weight: 3, arbitrary: fc.string({ unit: fc.constantFrom(...URL_CHARS), maxLength: 12 }) },
    ...(odd ? [{ weight: 2, arbitrary: fc.constantFrom(...ODD_PIECES) }, { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }) }] : []),
  );
  const path = fc.array(piece, { maxLength: 8 }).map((parts) => parts.join(''));
  const text = fc.oneof(
    { weight: 4, arbitrary: fc.tuple(fc.constantFrom('/recordings/', '/hls/', '/recordings', '/healthz', '/metrics', '/', '/api/v1/rooms', '/api/v1/rooms/fuzz/', '/api/v1/rooms/fuzz/participants', '/api/v1/rooms/fuzz/outputs/whiteboard/', '/api/v1/rooms/fuzz/data', '/api/'), path).map(([a, b]) => a + b) },
    { weight: 2, arbitrary: path.map((p) => `/${p}`) },
    { weight: 1, arbitrary: fc.constantFrom('*', '//', '///', 'http://x/', 'http://relay/healthz', 'https://[::1]:1/recordings', '/%', '/recordings/%', '/hls/%zz/%', '/healthz?', '/healthz#', '/healthz?#/..', '?', '#') },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('/', '/recordings/', '/hls/', 'x'), fc.integer({ min: 1, max: 8192 }), fc.constantFrom('a', '/', '%', '%2e', '../')).map(([a, n, r]) => a + r.repeat(Math.ceil(n / r.length))) },
    { weight: 1, arbitrary: path },
  );
  const bytes = text.map((t) => Buffer.from(t, 'utf8'));
  return odd ? fc.oneof({ weight: 3, arbitrary: bytes }, { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.concat([Buffer.from('/'), Buffer.from(b)])) }) : bytes;
}

/** A header; `odd` allows names and values the HTTP parser refuses. */
function header(authorizations: readonly string[], odd: boolean): fc.Arbitrary<[string, string]> {
  const value = fc.oneof(
    { weight: 4, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 40 }) },
    { weight: 4, arbitrary: fc.constantFrom('Bearer', 'Bearer ', 'Bearer  x', 'bearer a.b.c', 'Basic Zm9vOmJhcg==', 'websocket', 'Upgrade', 'close', 'keep-alive', 'chunked', '100-continue', 'bytes=0-1', '-1', '99999999999999999999', '0', 'application/json', 'application/json; charset=utf-8', 'text/plain', ...authorizations.map((a) => `Bearer ${a}`)) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('Bearer ', ''), fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('a', '.', ...(odd ? ['é', '\u0000'] : []))).map(([p, n, c]) => p + c.repeat(n)) },
    ...(odd ? [{ weight: 2, arbitrary: fc.string({ maxLength: 40 }) }, { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) }] : []),
  );
  const name = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...HEADER_NAMES) },
    { weight: 2, arbitrary: fc.string({ unit: fc.constantFrom(...TOKEN_CHARS), minLength: 1, maxLength: 16 }) },
    ...(odd ? [{ weight: 1, arbitrary: fc.string({ maxLength: 16 }) }] : []),
  );
  return fc.tuple(name, value);
}

/**
 * A whole request: line, headers (sometimes duplicated), `Connection: close`, maybe a body.
 * Most are well-formed HTTP (so they reach the relay's handler); the rest are anything.
 */
export function httpRequest(known: readonly string[] = [], authorizations: readonly string[] = []): fc.Arbitrary<Buffer> {
  const build = (odd: boolean) =>
    fc
      .record({
        method: odd ? fc.oneof(fc.constantFrom(...METHODS, ...ODD_METHODS), fc.string({ maxLength: 10 })) : fc.constantFrom(...METHODS, 'GET', 'GET', 'GET', 'HEAD'),
        target: target(known, odd),
        version: odd ? fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/9.9', 'HTTP/1.1 extra', '', 'http/1.1') : fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0'),
        headers: fc.array(header(authorizations, odd), { maxLength: 6 }),
        duplicate: fc.boolean(),
        host: odd ? fc.constantFrom('Host: relay\r\n', '', 'Host: \r\n', 'Host: a\r\nHost: b\r\n') : fc.constant('Host: relay\r\n'),
        body: fc.oneof(
          { weight: 4, arbitrary: fc.constant(new Uint8Array(0)) },
          { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }) },
          // bodies the server API parses: JSON of any shape, the routes' own fields, deep nesting
          { weight: 2, arbitrary: fc.oneof(fc.json({ maxDepth: 4 }), fc.record({ topic: fc.constantFrom('t', '', 'x'.repeat(2000)), payload: fc.jsonValue({ maxDepth: 3 }), to: fc.option(fc.array(fc.string(), { maxLength: 3 }), { nil: undefined }), persist: fc.option(fc.boolean(), { nil: undefined }), options: fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined }) }).map((r) => JSON.stringify(r)), fc.integer({ min: 1, max: 3000 }).map((n) => `{"payload":${'['.repeat(n)}${']'.repeat(n)}}`)).map((t) => Buffer.from(t, 'utf8')) },
        ),
      })
      .map(({ method, target, version, headers, duplicate, host, body }) => {
        const all = duplicate && headers.length > 0 ? [...headers, headers[0]!, headers[0]!] : headers;
        return Buffer.concat([
          Buffer.from(`${method} `, 'utf8'),
          target,
          Buffer.from(` ${version}\r\n${host}${all.map(([n, v]) => `${n}: ${v}\r\n`).join('')}Connection: close\r\n\r\n`, 'utf8'),
          Buffer.from(body),
        ]);
      });
  return fc.oneof({ weight: 3, arbitrary: build(false) }, { weight: 1, arbitrary: build(true) });
}

/**
 * Well-formed requests to the server API with a real server-API token: its routes with made-up
 * rooms, ids and outputs, every method, content types right and wrong, JSON bodies of any shape
 * (the routes' fields among them), deep nesting, a length that lies.
 */
export function apiRequest(authorization: string, rooms: readonly string[]): fc.Arbitrary<Buffer> {
  const id = fc.oneof(fc.constantFrom(...rooms, 'nobody', '%00', 'x'.repeat(200), '%zz', 'é'), fc.string({ unit: fc.constantFrom(...URL_CHARS), minLength: 1, maxLength: 8 }));
  const path = fc.oneof(
    fc.constant('/api/v1/rooms'),
    fc.tuple(id, fc.constantFrom('', '/participants', '/data', '/outputs/whiteboard/start', '/outputs/whiteboard/stop', '/outputs/recording/start', '/outputs/nothing/stop', '/participants/host')).map(([r, tail]) => `/api/v1/rooms/${r}${tail}`),
    fc.tuple(id, id).map(([r, p]) => `/api/v1/rooms/${r}/participants/${p}`),
  );
  const query = fc.constantFrom('', '?limit=1', '?limit=100', '?limit=101', '?limit=abc', '?tier=viewer', '?tier=nobody', '?cursor=dg', '?cursor=%%', '?limit=1000&tier=speaker');
  const body = fc.oneof(
    fc.constant(''),
    fc.json({ maxDepth: 4 }),
    fc.record({ topic: fc.constantFrom('t', '', 'x'.repeat(2000)), payload: fc.jsonValue({ maxDepth: 3 }), to: fc.option(fc.array(fc.string(), { maxLength: 3 }), { nil: undefined }), persist: fc.option(fc.boolean(), { nil: undefined }), options: fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined }) }).map((r) => JSON.stringify(r)),
    fc.integer({ min: 60, max: 5000 }).map((n) => `{"topic":"t","payload":${'['.repeat(n)}${']'.repeat(n)}}`),
  );
  return fc
    .record({
      method: fc.constantFrom('GET', 'GET', 'POST', 'POST', 'DELETE', 'PUT', 'HEAD', 'PATCH'),
      path,
      query,
      body,
      type: fc.constantFrom('application/json', 'application/json', 'text/plain', 'application/json; charset=utf-8', ''),
      length: fc.constantFrom('right', 'right', 'right', 'none', 'huge'),
    })
    .map(({ method, path, query, body, type, length }) => {
      const bytes = Buffer.from(body, 'utf8');
      const size = length === 'huge' ? 'Content-Length: 99999999\r\n' : length === 'none' ? '' : `Content-Length: ${bytes.length}\r\n`;
      return Buffer.concat([Buffer.from(`${method} ${path}${query} HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer ${authorization}\r\n${type ? `Content-Type: ${type}\r\n` : ''}${size}Connection: close\r\n\r\n`, 'utf8'), length === 'none' ? Buffer.alloc(0) : bytes]);
    });
}

/** What a fuzz run saw. */
export interface HttpFuzzReport {
  requests: number;
  seconds: number;
  /** Answers by status (`none` when the connection closed without a response). */
  statuses: Record<string, number>;
  /** `/healthz` checks after each batch that did not answer 200. */
  unhealthy: number;
}

/**
 * Send `total` generated requests, `concurrency` at a time, in batches of `batch`; after each
 * batch `/healthz` must answer 200. `alive` (if given) is asked too, e.g. whether a child
 * process still runs; a false answer stops the run.
 */
export async function httpFuzz(options: { port: number; total: number; seed?: number; concurrency?: number; batch?: number; known?: readonly string[]; authorizations?: readonly string[]; alive?: () => boolean; arbitrary?: fc.Arbitrary<Buffer> }): Promise<HttpFuzzReport> {
  const { port, total, seed = 7, concurrency = 16, batch = 500 } = options;
  const arbitrary = options.arbitrary ?? httpRequest(options.known, options.authorizations);
  const statuses: Record<string, number> = {};
  let unhealthy = 0;
  let sent = 0;
  const started = performance.now();
  for (let round = 0; sent < total; round++) {
    const start = sent;
    const end = Math.min(total, sent + batch);
    const samples = fc.sample(arbitrary, { numRuns: end - start, seed: seed + round });
    const workers = Array.from({ length: concurrency }, async () => {
      while (sent < end) {
        const i = sent++;
        const res = await rawHttp(port, samples[i - start]!, 3000);
        const key = String(res.status ?? 'none');
        statuses[key] = (statuses[key] ?? 0) + 1;
      }
    });
    await Promise.all(workers);
    const health = await rawHttp(port, request('/healthz'));
    if (health.status !== 200) unhealthy++;
    if (options.alive && !options.alive()) break;
  }
  return { requests: sent, seconds: (performance.now() - started) / 1000, statuses, unhealthy };
}

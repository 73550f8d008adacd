/**
 * The server API's front door, `/api/v1/...`: the route table's match, then the checks in a
 * fixed order — method, token (before any byte of the body is read), the key's rate, the body —
 * then the handler. Every request is answered with JSON: the result, or `{ error }` with the
 * status of its code. Nothing a request sends can throw out of here.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorCode, ErrorReason, WireError } from '../../src/protocol/codes.ts';
import type { ApiErrorBody } from '../../src/protocol/server-api.ts';
import type { RelayContext } from '../context.ts';
import { RelayError, toWireError } from '../errors.ts';
import { ApiBudgets, authorize } from './auth.ts';
import { readBody } from './body.ts';
import { match, type ApiCall, type ApiRunner } from './routes.ts';

/** How long a request body may take to arrive. */
const BODY_TIMEOUT_MS = 5000;

const STATUS: { readonly [C in ErrorCode]: number } = {
  INVALID_TOKEN: 401, INVALID_API_KEY: 401, INVALID_PERMISSIONS: 403, UNAUTHORIZED_ROOM: 403, UNAUTHORIZED_PARTICIPANT: 403, INVALID_ENTRY_CLAIM: 403,
  ENTRY_DENIED: 403, ENTRY_TIMEOUT: 408, ENTRY_CANCELLED: 409,
  CONNECTION_FAILED: 502, CONNECTION_LOST: 502, TIMEOUT: 504, INTERNAL_ERROR: 500,
  INVALID_ARGUMENT: 400, NOT_FOUND: 404, PAYLOAD_TOO_LARGE: 413, RATE_LIMITED: 429,
  NOT_CONNECTED: 409, ROOM_ENDED: 409, INVALID_STATE: 409,
};
/** Reasons whose HTTP status is more precise than their code's. */
const REASON_STATUS: Partial<Record<ErrorReason, number>> = { 'method-not-allowed': 405, 'bad-content-type': 415, 'body-timeout': 408 };

/** The HTTP status of a refusal of the server API. */
export function statusOf(error: WireError): number {
  return (error.reason && REASON_STATUS[error.reason]) || STATUS[error.code];
}

const budgetsOf = new WeakMap<RelayContext, ApiBudgets>();

/** The relay's budgets of the server API, per API key. */
export function apiBudgets(relay: RelayContext): ApiBudgets {
  let budgets = budgetsOf.get(relay);
  if (!budgets) budgetsOf.set(relay, (budgets = new ApiBudgets(relay)));
  return budgets;
}

function answer(req: IncomingMessage, res: ServerResponse, status: number, body: unknown, headers: Record<string, string | number> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', ...headers });
  res.end(req.method === 'HEAD' ? undefined : text);
}

/** Answer a refusal; the connection closes unless the whole request was read (its body may still be coming). */
function refuse(req: IncomingMessage, res: ServerResponse, error: WireError, headers: Record<string, string | number> = {}): void {
  const body: ApiErrorBody = { error };
  const status = statusOf(error);
  answer(req, res, status, body, {
    ...(req.complete ? {} : { connection: 'close' }),
    ...(status === 401 ? { 'www-authenticate': 'Bearer' } : {}),
    ...(status === 429 ? { 'retry-after': 1 } : {}),
    ...headers,
  });
}

/** Serve a request under `/api` (`segments` after it). Never throws. */
export function serveApi(req: IncomingMessage, res: ServerResponse, relay: RelayContext, segments: readonly string[], run: ApiRunner): void {
  handle(req, res, relay, segments, run).catch((err: unknown) => {
    if (!(err instanceof RelayError)) {
      relay.counters.faults++;
      relay.log.error('server API request failed', { method: req.method, target: req.url, error: err instanceof Error ? err.message : String(err) });
    }
    const error = toWireError(err);
    if (res.headersSent) res.destroy();
    else refuse(req, res, error, error.reason === 'method-not-allowed' ? { allow: allowed(segments) } : {});
  });
}

function allowed(segments: readonly string[]): string {
  const methods = new Set<string>(match(segments.slice(1)).map(({ route }) => route.method));
  if (methods.has('GET')) methods.add('HEAD');
  return [...methods].join(', ');
}

async function handle(req: IncomingMessage, res: ServerResponse, relay: RelayContext, segments: readonly string[], run: ApiRunner): Promise<void> {
  const [version, ...path] = segments;
  const candidates = version === 'v1' ? match(path) : [];
  if (candidates.length === 0) throw new RelayError('NOT_FOUND', 'no such route of the server API (see docs/server-api.md)', 'unknown-route');
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  const found = candidates.find(({ route }) => route.method === method);
  if (!found) throw new RelayError('INVALID_ARGUMENT', `${String(req.method).slice(0, 16)} is not allowed here`, 'method-not-allowed');
  const caller = authorize(req, relay, apiBudgets(relay));
  const body = await readBody(req, found.route.body, relay.config.maxFrameBytes, BODY_TIMEOUT_MS);
  const at = (req.url ?? '').indexOf('?');
  const query = new URLSearchParams(at < 0 ? '' : (req.url ?? '').slice(at + 1));
  const call: ApiCall<string> = { relay, caller, params: found.params, query, body };
  const result = await run(found.route, call);
  answer(req, res, 200, result);
}

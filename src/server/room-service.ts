import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { JsonValue } from '../protocol/messages.ts';
import type { OutputName, OutputOptions, OutputStatus } from '../protocol/control.ts';
import { API_PREFIX, type ParticipantPage, type PublishResult, type RoomPage, type RoomSummary } from '../protocol/server-api.ts';
import { isRecord, type Parsed } from '../protocol/parse.ts';
import { parseDone, parseOutputAnswer, parseParticipantPage, parsePublished, parseRoomPage, parseRoomSummary } from '../protocol/validate-server-api.ts';
import { SdkError } from '../errors.ts';
import { signJwt } from './jwt.ts';

/** What {@link RoomService} needs: where the relay is, and a key of your project. */
export interface RoomServiceOptions {
  /**
   * The relay: its `ws://`/`wss://` URL (as given to `Sdk.join`) or its `http://`/`https://` one,
   * with the path a proxy serves it at, if any (`wss://example.com/tessera`).
   * Several URLs (nodes of one cluster): a call that cannot reach one (for `https`, whose TLS
   * handshake fails too) goes to the next. A call
   * whose connection fails after it reached a node goes to the next only if it is a read; any
   * other is `CONNECTION_FAILED` (`answer-lost`): it may have been carried out.
   */
  url: string | readonly string[];
  /** Your API key: the `iss` of the tokens the service mints. */
  apiKey: string;
  /** Its secret; never leaves your backend. */
  secret: string;
  /** How long a call may take (ms); default 20,000 (an output may take 15 s to start). */
  timeoutMs?: number;
  /** Lifetime of the tokens it mints for itself, seconds; default 60 (the relay's ceiling is 600). */
  tokenTtl?: number;
}

/** Options of {@link RoomService.listParticipants}: the SDK's `participants.list`, with the same cursors. */
export interface ListParticipantsOptions {
  /** `speaker` (on stage, the default) or `viewer` (the audience). */
  tier?: 'speaker' | 'viewer';
  /** 1 to 1000; default 100. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string | null;
}

/** Options of {@link RoomService.publishData}, as `room.pubsub.publish`'s. */
export interface PublishDataOptions {
  /** Only these participant ids (viewers included) receive it. */
  to?: string[];
  /** Keep it in the topic's history for later joiners. */
  persist?: boolean;
}

/** The longest `timeoutMs` (what a timer holds). */
const MAX_TIMEOUT_MS = 2_147_483_647;

/** Largest answer read from the relay. */
const MAX_ANSWER = 16 * 1024 * 1024;

function withoutTrailingSlashes(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0x2f) end--;
  return text.slice(0, end);
}

function httpBase(url: string): string {
  // a path is where a proxy serves the relay (`wss://example.com/tessera`): the API is under it
  // trailing slashes cut first: a pattern that left them to a lazy group took time quadratic in them
  const m = /^(ws|wss|http|https):\/\/([^/?#]+)((?:\/[A-Za-z0-9._~!$&'()*+,;=:@%-]*)*)$/i.exec(withoutTrailingSlashes(url.trim()));
  if (!m || /(^|\/)\.\.?(\/|$)/.test(m[3]!)) throw new SdkError('INVALID_ARGUMENT', `url must be the relay's ws://, wss://, http:// or https:// address (a path is where a proxy serves it), got ${JSON.stringify(url)}`, { reason: 'bad-url' });
  const scheme = m[1]!.toLowerCase();
  return `${scheme === 'ws' ? 'http' : scheme === 'wss' ? 'https' : scheme}://${m[2]}${m[3]}`;
}

function nonEmpty(name: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) throw new SdkError('INVALID_ARGUMENT', `${name} must be a non-empty string`);
  // a lone surrogate cannot be sent in a URL (encodeURIComponent throws a URIError)
  if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(value)) throw new SdkError('INVALID_ARGUMENT', `${name} is not well-formed text (a lone surrogate)`);
  return value;
}

/**
 * The relay's server API for your backend: see and act on your project's rooms. Each call is
 * authorized by a short-lived server-API token (`admin: true`) the service signs itself with
 * your secret; such a token never joins a room. Every failure is an {@link SdkError} with the
 * relay's `code`, `kind` and `reason` (or `CONNECTION_FAILED` / `TIMEOUT` when the relay
 * cannot be reached in time). Every answer is checked against the call's result before it is
 * returned: one that does not fit (not the relay's, or a broken relay) is `INTERNAL_ERROR`
 * (`bad-response`), never a value of the wrong shape.
 *
 * @example
 * ```ts
 * import { RoomService } from 'tessera/server';
 *
 * const rooms = new RoomService({ url: 'wss://relay.example.com', apiKey: process.env.TESSERA_API_KEY!, secret: process.env.TESSERA_API_SECRET! });
 * const { rooms: open } = await rooms.listRooms();
 * for (const room of open) console.log(room.roomId, room.counts.total);
 * await rooms.removeParticipant('town-hall', 'heckler');
 * ```
 */
export class RoomService {
  private readonly bases: string[];
  private readonly apiKey: string;
  private readonly secret: string;
  private readonly timeoutMs: number;
  private readonly tokenTtl: number;

  constructor(options: RoomServiceOptions) {
    const urls = typeof options?.url === 'string' ? [options.url] : [...(options?.url ?? [])];
    if (urls.length === 0) throw new SdkError('INVALID_ARGUMENT', 'url: give the relay\'s address', { reason: 'bad-url' });
    this.bases = urls.map(httpBase);
    this.apiKey = nonEmpty('apiKey', options.apiKey);
    this.secret = nonEmpty('secret', options.secret);
    this.timeoutMs = options.timeoutMs ?? 20_000;
    // NaN, 0, negatives and values past a timer's range would time every call out at once
    if (!(Number.isInteger(this.timeoutMs) && this.timeoutMs >= 1 && this.timeoutMs <= MAX_TIMEOUT_MS)) throw new SdkError('INVALID_ARGUMENT', `timeoutMs must be a whole number of ms from 1 to ${MAX_TIMEOUT_MS}`);
    this.tokenTtl = options.tokenTtl ?? 60;
    // the relay refuses longer ones unless it was started with a higher --max-ttl-admin
    if (!(Number.isInteger(this.tokenTtl) && this.tokenTtl > 0 && this.tokenTtl <= 3600)) throw new SdkError('INVALID_ARGUMENT', 'tokenTtl must be 1 to 3600 seconds (the relay refuses more than its --max-ttl-admin, 600 by default)');
  }

  /**
   * One page of the project's open rooms, in the order of their ids.
   *
   * @example
   * ```ts
   * let cursor: string | null = null;
   * do {
   *   const page = await service.listRooms({ limit: 100, cursor });
   *   page.rooms.forEach((r) => console.log(r.roomId, r.counts));
   *   cursor = page.nextCursor;
   * } while (cursor);
   * ```
   */
  async listRooms(options: { limit?: number; cursor?: string | null } = {}): Promise<RoomPage> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.cursor) query.set('cursor', options.cursor);
    return this.call('GET', ['rooms'], parseRoomPage, query);
  }

  /**
   * One open room: its counts, lobby and outputs. `NOT_FOUND` (`unknown-room`) when it is not open.
   *
   * @example
   * ```ts
   * const { counts, outputs } = await service.getRoom('town-hall');
   * ```
   */
  async getRoom(roomId: string): Promise<RoomSummary> {
    return this.call('GET', ['rooms', nonEmpty('roomId', roomId)], parseRoomSummary);
  }

  /**
   * One page of a room's participants of one tier, in join order, with the SDK's cursors: a
   * participant present for the whole walk appears exactly once.
   *
   * @example
   * ```ts
   * const page = await service.listParticipants('town-hall', { tier: 'viewer', limit: 500 });
   * const next = page.nextCursor && (await service.listParticipants('town-hall', { tier: 'viewer', cursor: page.nextCursor }));
   * ```
   */
  async listParticipants(roomId: string, options: ListParticipantsOptions = {}): Promise<ParticipantPage> {
    const query = new URLSearchParams({ tier: options.tier ?? 'speaker' });
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.cursor) query.set('cursor', options.cursor);
    return this.call('GET', ['rooms', nonEmpty('roomId', roomId), 'participants'], parseParticipantPage, query);
  }

  /**
   * Remove a participant (on stage or in the audience, by id): its session ends with
   * `removed`, and its token cannot bring it back into the room.
   *
   * @example
   * ```ts
   * await service.removeParticipant('town-hall', 'heckler');
   * ```
   */
  async removeParticipant(roomId: string, participantId: string): Promise<void> {
    await this.call('DELETE', ['rooms', nonEmpty('roomId', roomId), 'participants', nonEmpty('participantId', participantId)], parseDone);
  }

  /**
   * End a room: every session ends with `room-ended`, the lobby is refused.
   *
   * @example
   * ```ts
   * await service.endRoom('town-hall');
   * ```
   */
  async endRoom(roomId: string): Promise<void> {
    await this.call('DELETE', ['rooms', nonEmpty('roomId', roomId)], parseDone);
  }

  /**
   * Start an output of a room, as `room.recording.start(options)` would (`by` in
   * `output-changed` is `server-api`); resolves when it is active.
   *
   * @example
   * ```ts
   * const status = await service.startOutput('town-hall', 'livestream', { url: 'rtmp://live.example/app/key' });
   * ```
   */
  async startOutput<O extends OutputName>(roomId: string, output: O, options?: OutputOptions[O]): Promise<OutputStatus<O>> {
    return this.call('POST', ['rooms', nonEmpty('roomId', roomId), 'outputs', nonEmpty('output', output), 'start'], (value) => parseOutputAnswer(output, value), undefined, options === undefined ? {} : { options });
  }

  /**
   * Stop an output of a room; resolves when it is stopped.
   *
   * @example
   * ```ts
   * await service.stopOutput('town-hall', 'recording');
   * ```
   */
  async stopOutput<O extends OutputName>(roomId: string, output: O): Promise<OutputStatus<O>> {
    return this.call('POST', ['rooms', nonEmpty('roomId', roomId), 'outputs', nonEmpty('output', output), 'stop'], (value) => parseOutputAnswer(output, value));
  }

  /**
   * Publish a message to a room's topic, as `room.pubsub.publish` does; its `from` is
   * `server-api`. Resolves with its id, time and how many received it.
   *
   * @example
   * ```ts
   * await service.publishData('town-hall', 'announcements', { text: 'We start in 5 minutes' }, { persist: true });
   * ```
   */
  async publishData(roomId: string, topic: string, payload: JsonValue, options: PublishDataOptions = {}): Promise<PublishResult> {
    // the options' own fields only: an options object built from user data cannot replace the topic or payload
    return this.call('POST', ['rooms', nonEmpty('roomId', roomId), 'data'], parsePublished, undefined, { topic, payload, to: options.to, persist: options.persist });
  }

  /**
   * Delete one finished recording of a room: every file of it on the relay, which gives its
   * bytes back to your project's disk quota (`--disk-quota`: at it, recordings and HLS do not
   * start). The room need not be open. `NOT_FOUND` (`unknown-recording`) when the relay has no
   * such recording of this room in your project; `INVALID_STATE` (`recording-active`) while it
   * is still being written (stop it, and wait for `recording-ready`).
   *
   * @example
   * ```ts
   * // in your webhook handler, once the files are copied to your own storage:
   * const event = receiver.receive(rawBody, req.headers.authorization);
   * if (event.event === 'recording-ready') await service.deleteRecording(event.roomId, event.data.recording.recording);
   * ```
   */
  async deleteRecording(roomId: string, recordingId: string): Promise<void> {
    await this.call('DELETE', ['rooms', nonEmpty('roomId', roomId), 'recordings', nonEmpty('recordingId', recordingId)], parseDone);
  }

  private token(): string {
    const now = Math.floor(Date.now() / 1000);
    return signJwt({ iss: this.apiKey, admin: true, iat: now, exp: now + this.tokenTtl }, this.secret);
  }

  /** One call of the API; a 2xx answer is checked by `parse` (its shape), a refusal becomes its `SdkError`. */
  private async call<T>(method: string, path: string[], parse: (value: unknown) => Parsed<T>, query?: URLSearchParams, body?: unknown): Promise<T> {
    const target = `${API_PREFIX}/${path.map(pathSegment).join('/')}${query && query.size > 0 ? `?${query}` : ''}`;
    let payload: string | undefined;
    try {
      payload = body === undefined ? undefined : JSON.stringify(body);
    } catch (err) {
      throw new SdkError('INVALID_ARGUMENT', `the call's body cannot be sent as JSON (${(err as Error).message})`, { reason: 'bad-body', cause: err });
    }
    let lastError: unknown;
    for (const base of this.bases) {
      let res: { status: number; text: string };
      try {
        res = await send(base, method, target, `Bearer ${this.token()}`, payload, this.timeoutMs);
      } catch (err) {
        if (err instanceof SdkError) throw err;
        // a call that reached a node may have been carried out there: only a read goes to the next
        if (err instanceof AnswerLost && method !== 'GET') throw new SdkError('CONNECTION_FAILED', `the relay took the call but its answer was lost (${err.message}): it may have been carried out`, { reason: 'answer-lost', cause: err });
        lastError = err;
        continue;
      }
      return answer(res.status, res.text, `${method} ${target}`, parse);
    }
    throw new SdkError('CONNECTION_FAILED', `the relay cannot be reached (${(lastError as Error)?.message ?? 'no answer'})`, { reason: 'unreachable', cause: lastError });
  }
}

/**
 * One path segment: percent-encoded, and a segment of dots escaped, so that no URL parser on
 * the way (fetch's included) takes an id `.` or `..` for a dot segment and sends the call to
 * another route.
 */
function pathSegment(value: string): string {
  return /^\.+$/.test(value) ? value.replace(/\./g, '%2E') : encodeURIComponent(value);
}

/** The socket failed after it connected: the node may have the request. */
class AnswerLost extends Error {}

/**
 * One request with its path sent as written (node:http does not resolve dot segments), its
 * answer read up to {@link MAX_ANSWER}. Rejects with an `SdkError` for a timeout or an answer
 * too large, with the socket's error when the relay cannot be reached (the next node is tried),
 * with {@link AnswerLost} when the socket failed after it connected.
 */
function send(base: string, method: string, target: string, authorization: string, body: string | undefined, timeoutMs: number): Promise<{ status: number; text: string }> {
  const url = new URL(base);
  const secure = url.protocol === 'https:';
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (error: unknown, value?: { status: number; text: string }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error) {
        req.destroy();
        reject(error);
      } else resolve(value!);
    };
    const timer = setTimeout(() => finish(new SdkError('TIMEOUT', `the relay did not answer within ${timeoutMs} ms`)), timeoutMs);
    const options = {
      host: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
      port: url.port || (secure ? 443 : 80),
      method,
      // under the path the relay is served at, if any
      path: withoutTrailingSlashes(url.pathname) + target,
      headers: { authorization, ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }) },
    };
    const onResponse = (res: IncomingMessage) => {
      const length = Number(res.headers['content-length']);
      if (Number.isFinite(length) && length > MAX_ANSWER) return finish(new SdkError('INTERNAL_ERROR', `the relay's answer is ${length} bytes`, { reason: 'bad-response' }));
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER) return finish(new SdkError('INTERNAL_ERROR', `the relay's answer is over ${MAX_ANSWER} bytes`, { reason: 'bad-response' }));
        chunks.push(chunk);
      });
      res.on('end', () => finish(null, { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (err) => finish(new SdkError('CONNECTION_FAILED', `the relay's answer was cut (${err.message})`, { reason: 'unreachable', cause: err })));
    };
    const req = secure ? httpsRequest(options, onResponse) : httpRequest(options, onResponse);
    // the request can reach the node only once its socket is up: for https, once TLS is (a
    // handshake that fails never carried it, and the next node may have it)
    let connected = false;
    req.once('socket', (socket) => {
      if (!socket.connecting) connected = true;
      else socket.once(secure ? 'secureConnect' : 'connect', () => (connected = true));
    });
    req.on('error', (err) => finish(connected ? new AnswerLost(err.message) : err));
    req.end(body);
  });
}

/** What the relay answered: a 2xx's value of the shape `parse` checks, else the refusal thrown. */
function answer<T>(status: number, text: string, call: string, parse: (value: unknown) => Parsed<T>): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new SdkError('INTERNAL_ERROR', `the relay answered ${status} without JSON (is this a Tessera relay?)`, { reason: 'bad-response', cause: err });
  }
  if (!isRecord(value)) throw new SdkError('INTERNAL_ERROR', `the relay answered ${status} with something other than a JSON object`, { reason: 'bad-response' });
  if (status >= 200 && status < 300) {
    const parsed = parse(value);
    // the relay's own answers always fit: one that does not came from something else, or a broken relay
    if (!parsed.ok) throw new SdkError('INTERNAL_ERROR', `the relay answered ${call} with ${status} and a body that does not fit: ${parsed.problem}`, { reason: 'bad-response' });
    return parsed.value;
  }
  const error = value.error;
  if (isRecord(error) && typeof error.code === 'string' && typeof error.message === 'string') {
    throw SdkError.fromWire({ code: error.code, message: error.message, ...(typeof error.reason === 'string' ? { reason: error.reason } : {}), ...(typeof error.kind === 'string' ? { kind: error.kind } : {}) });
  }
  throw new SdkError('INTERNAL_ERROR', `the relay answered ${status} without an error`, { reason: 'bad-response' });
}

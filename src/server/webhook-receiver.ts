import { createHash, timingSafeEqual } from 'node:crypto';
import { SdkError } from '../errors.ts';
import { isRecord } from '../protocol/parse.ts';
import { WEBHOOK_EVENTS, type WebhookEvent, type WebhookEventName } from '../protocol/server-api.ts';
import { parseWebhookData } from '../protocol/validate-server-api.ts';
import { verifyJwt } from './jwt.ts';

/** What {@link WebhookReceiver} verifies with: your key and secret, or every key of the project (rotations). */
export type WebhookReceiverOptions =
  | { apiKey: string; secret: string; leeway?: number }
  | { keys: Readonly<Record<string, string>>; leeway?: number };

const EVENTS: ReadonlySet<string> = new Set(WEBHOOK_EVENTS);
const isEventName = (name: string): name is WebhookEventName => EVENTS.has(name);

/**
 * Verifies and parses the relay's webhooks. Each one is a POST whose `Authorization: Bearer
 * <JWT>` is signed (HS256) with your project's secret, names the API key in `iss`, expires
 * within minutes, and carries the SHA-256 of the body (`sha256`, base64): give `receive` the
 * raw body as it arrived, before any JSON parsing. A delivery may come twice (a retry after a
 * lost answer): deduplicate on `event.id`. Answer 2xx quickly; the relay retries otherwise.
 *
 * @example
 * ```ts
 * import { SdkError, WebhookReceiver } from 'tessera/server';
 *
 * const receiver = new WebhookReceiver({ apiKey: process.env.TESSERA_API_KEY!, secret: process.env.TESSERA_API_SECRET! });
 * app.post('/tessera/webhooks', express.raw({ type: 'application/json' }), (req, res) => {
 *   try {
 *     const event = receiver.receive(req.body, req.get('authorization'));
 *     if (event.event === 'recording-ready') saveRecording(event.roomId, event.data.recording);
 *     res.sendStatus(204);
 *   } catch (err) {
 *     // a newer relay's kind of event is genuine: taken, so that it is not retried
 *     if (err instanceof SdkError && err.reason === 'unknown-event') return res.sendStatus(204);
 *     res.sendStatus(401); // forged, altered, expired or from another project
 *   }
 * });
 * ```
 */
export class WebhookReceiver {
  private readonly keys: ReadonlyMap<string, string>;
  private readonly leeway: number;

  constructor(options: WebhookReceiverOptions) {
    if (typeof options !== 'object' || options === null) throw new SdkError('INVALID_ARGUMENT', 'WebhookReceiver takes an options object: { apiKey, secret } or { keys }');
    const keys = 'keys' in options ? Object.entries(options.keys ?? {}) : [[options.apiKey, options.secret] as [string, string]];
    if (keys.length === 0 || keys.some(([k, s]) => typeof k !== 'string' || !k || typeof s !== 'string' || !s)) {
      throw new SdkError('INVALID_ARGUMENT', 'give apiKey and secret (or keys: { apiKey: secret }) as non-empty strings');
    }
    this.keys = new Map(keys);
    const leeway = options.leeway ?? 30;
    // NaN would make every expiry check false: a captured webhook would be good forever
    if (typeof leeway !== 'number' || !Number.isFinite(leeway) || leeway < 0) throw new SdkError('INVALID_ARGUMENT', 'leeway must be a finite number of seconds, 0 or more');
    this.leeway = leeway;
  }

  /**
   * Verify a webhook and return its event. Throws an {@link SdkError}: `INVALID_TOKEN`
   * (`missing`, `malformed`, `unsupported-algorithm`, `bad-signature`, `expired`,
   * `bad-body-hash` when the body is not the one signed), `INVALID_API_KEY` (`unknown-api-key`:
   * signed by a key you did not give), or `INVALID_ARGUMENT` (`bad-body`: signed, but not an
   * event, or an event whose `data` does not fit its kind, or a body that is not raw: an object
   * your framework parsed; `unknown-event`: signed and well-formed, of a kind a newer relay
   * sends, or an `output-changed` of an output or state it has — answer it 2xx, or the relay
   * retries it). The event's `data` is checked against its kind before it is returned.
   *
   * @param body the raw request body, exactly as received: a string, a `Buffer` (or other
   * byte view) or an `ArrayBuffer`
   * @param authorization the request's `Authorization` header
   */
  receive(body: string | Uint8Array | ArrayBuffer, authorization: string | null | undefined): WebhookEvent {
    const match = typeof authorization === 'string' ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization) : null;
    if (!match) throw new SdkError('INVALID_TOKEN', 'no Authorization: Bearer <token> header', { reason: 'missing' });
    const verified = verifyJwt(match[1]!, (apiKey) => this.keys.get(apiKey));
    if (!verified.ok) {
      const { problem } = verified;
      if (problem === 'unknown-api-key') throw new SdkError('INVALID_API_KEY', 'the webhook is signed for an API key this receiver does not know', { reason: 'unknown-api-key' });
      throw new SdkError('INVALID_TOKEN', `the webhook's token is not valid (${problem})`, { reason: problem });
    }
    const { claims } = verified;
    if (typeof claims.exp !== 'number' || !Number.isFinite(claims.exp)) throw new SdkError('INVALID_TOKEN', 'the token has no exp', { reason: 'malformed' });
    if (Date.now() / 1000 > claims.exp + this.leeway) throw new SdkError('INVALID_TOKEN', 'the webhook token has expired', { reason: 'expired' });
    const bytes = rawBytes(body);
    const hash = createHash('sha256').update(bytes).digest();
    const claimed = typeof claims.sha256 === 'string' ? Buffer.from(claims.sha256, 'base64') : Buffer.alloc(0);
    if (claimed.length !== hash.length || !timingSafeEqual(claimed, hash)) throw new SdkError('INVALID_TOKEN', 'the body is not the one the relay signed', { reason: 'bad-body-hash' });
    let event: unknown;
    try {
      event = JSON.parse(bytes.toString('utf8'));
    } catch (err) {
      throw new SdkError('INVALID_ARGUMENT', 'the webhook body is not JSON', { reason: 'bad-body', cause: err });
    }
    if (!isEvent(event)) throw new SdkError('INVALID_ARGUMENT', 'the webhook body is not an event', { reason: 'bad-body' });
    // signed and well-formed, of a kind a newer relay sends: answered 2xx, it is not sent again
    if (!isEventName(event.event)) throw unknownEvent(JSON.stringify(event.event.slice(0, 64)));
    const data = parseWebhookData(event.event, event.data);
    if (!data.ok) throw new SdkError('INVALID_ARGUMENT', `the webhook's data does not fit a ${event.event} event: ${data.problem}`, { reason: 'bad-body' });
    // an output or a state a newer relay has: as new to this version as a new kind of event
    if (data.value === null) throw unknownEvent(`${event.event} of an output or a state a newer relay has`);
    return { ...event, data: data.value } as WebhookEvent;
  }
}

/** A signed, well-formed webhook this version cannot read: the integrator answers it 2xx. */
function unknownEvent(what: string): SdkError {
  return new SdkError('INVALID_ARGUMENT', `a webhook event this version of tessera/server does not know (${what}): answer it 2xx, and update tessera to read it`, { reason: 'unknown-event' });
}

/** The body as bytes: a string (UTF-8), a Buffer or other view, an ArrayBuffer; anything else (a parsed body) is refused. */
function rawBytes(body: unknown): Buffer {
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  throw new SdkError('INVALID_ARGUMENT', 'give receive() the raw body as received (a string or bytes), not a parsed one: the signature covers its exact bytes', { reason: 'bad-body' });
}

function isEvent(value: unknown): value is Omit<WebhookEvent, 'event'> & { event: string } {
  return (
    isRecord(value) &&
    typeof value.id === 'string' &&
    typeof value.event === 'string' &&
    typeof value.createdAt === 'number' &&
    typeof value.project === 'string' &&
    typeof value.roomId === 'string' &&
    isRecord(value.data)
  );
}

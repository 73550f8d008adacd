/**
 * Request bodies of the server API, read within a byte limit and a deadline, then parsed and
 * checked for shape before any handler sees them. Every failure is a `RelayError`.
 */
import type { IncomingMessage } from 'node:http';
import { MAX_PAYLOAD_DEPTH, nestsWithin } from '../../src/protocol/validate.ts';
import { isRecord } from '../../src/protocol/parse.ts';
import { RelayError } from '../errors.ts';

/** How a route takes its body. */
export type BodyRule = 'none' | 'json';

/** True when the request announces a body (a length above 0, or chunks). */
export function announcesBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  // Node takes a length of several zeros ("00") as zero
  return length !== undefined && !/^0+$/.test(length);
}

/**
 * The JSON object a request carries: refused early by `content-length` or content type, read
 * up to `maxBytes` (a larger chunked body is cut when it passes the limit), within `timeoutMs`
 * (a body that trickles is cut), parsed, and nested at most {@link MAX_PAYLOAD_DEPTH} deep. An
 * empty body is `{}`. A route without a body refuses one.
 */
export async function readBody(req: IncomingMessage, rule: BodyRule, maxBytes: number, timeoutMs: number): Promise<Record<string, unknown>> {
  if (rule === 'none') {
    if (announcesBody(req)) throw new RelayError('INVALID_ARGUMENT', `${req.method} on this route takes no body`, 'bad-body');
    return {};
  }
  if (!announcesBody(req)) return {};
  const type = req.headers['content-type'];
  if (typeof type !== 'string' || !/^application\/json[ \t]*(;|$)/i.test(type)) {
    throw new RelayError('INVALID_ARGUMENT', 'send the body as Content-Type: application/json', 'bad-content-type');
  }
  const length = Number(req.headers['content-length']);
  if (Number.isFinite(length) && length > maxBytes) throw new RelayError('PAYLOAD_TOO_LARGE', `the body is ${length} bytes; the limit is ${maxBytes}`, 'body-too-large');
  const text = await collect(req, maxBytes, timeoutMs);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new RelayError('INVALID_ARGUMENT', 'the body is not valid JSON', 'bad-body');
  }
  if (!isRecord(value)) throw new RelayError('INVALID_ARGUMENT', 'the body must be a JSON object', 'bad-body');
  if (!nestsWithin(value, MAX_PAYLOAD_DEPTH + 1)) throw new RelayError('INVALID_ARGUMENT', `the body may nest at most ${MAX_PAYLOAD_DEPTH + 1} arrays and objects deep`, 'bad-body');
  return value;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function collect(req: IncomingMessage, maxBytes: number, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (error: RelayError | null) => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onError);
      if (error) {
        // nothing more of it is wanted: stop reading, the refusal closes the connection
        req.pause();
        return reject(error);
      }
      try {
        resolve(utf8.decode(Buffer.concat(chunks, size)));
      } catch {
        reject(new RelayError('INVALID_ARGUMENT', 'the body is not UTF-8', 'bad-body'));
      }
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) return finish(new RelayError('PAYLOAD_TOO_LARGE', `the body is over the limit of ${maxBytes} bytes`, 'body-too-large'));
      chunks.push(chunk);
    };
    const onEnd = () => finish(null);
    const onError = () => finish(new RelayError('INVALID_ARGUMENT', 'the body ended early', 'bad-body'));
    const timer = setTimeout(() => finish(new RelayError('TIMEOUT', `the body did not arrive within ${timeoutMs} ms`, 'body-timeout')), timeoutMs);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onError);
  });
}

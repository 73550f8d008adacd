/**
 * One webhook delivery attempt: an HTTP(S) POST to a checked address within a deadline. The
 * URL comes from the keys file or the command line, yet it is still held to the livestream's
 * rule: the host is resolved once, refused when not public (unless `--allow-private-webhooks`),
 * and the request goes to the address that was checked, never to the name again.
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { PrivateTargetError, resolveTarget } from '../outputs/rtmp-target.ts';

/** A parsed webhook URL. */
export interface WebhookTarget {
  secure: boolean;
  /** The host as written (a name, or an IP address without brackets). */
  host: string;
  port: number;
  /** Path and query. */
  path: string;
  /** `Host` header value. */
  authority: string;
}

const MAX_URL = 2048;

/** Parse an `http://` or `https://` URL without user info or fragment; `null` if it is not one. */
export function parseWebhookUrl(url: string): WebhookTarget | null {
  if (url.length > MAX_URL || /[\s\u0000-\u001f\u007f]/.test(url)) return null;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.username || parsed.password || parsed.hash || !parsed.hostname) return null;
  const secure = parsed.protocol === 'https:';
  const host = parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname;
  return { secure, host, port: parsed.port ? Number(parsed.port) : secure ? 443 : 80, path: `${parsed.pathname}${parsed.search}`, authority: parsed.host };
}

/** How an attempt ended: delivered (a 2xx), or why not. */
export type PostOutcome = { ok: true } | { ok: false; why: string; permanent?: true };

/** Checked addresses by host, for a while: a receiver's name is asked of the DNS once in 30 s, not at every event (see `name-lookup.ts`). */
const resolved = new Map<string, { address: string; until: number }>();
const RESOLVED_MS = 30_000;
const MAX_RESOLVED = 256;

async function checkedAddress(host: string, allowPrivate: boolean): Promise<string> {
  const key = `${allowPrivate ? 1 : 0}${host}`;
  const known = resolved.get(key);
  if (known && known.until > Date.now()) return known.address;
  const { address } = await resolveTarget(host, allowPrivate);
  if (resolved.size >= MAX_RESOLVED) resolved.clear();
  resolved.set(key, { address, until: Date.now() + RESOLVED_MS });
  return address;
}

/**
 * POST `body` with `authorization`; resolves (never rejects) once the receiver answered with
 * its status, or the attempt failed or ran out of `timeoutMs` (the name's lookup included).
 * The answer's body is not read.
 */
export function postWebhook(url: string, body: string, authorization: string, timeoutMs: number, allowPrivate: boolean): Promise<PostOutcome> {
  const target = parseWebhookUrl(url);
  if (!target) return Promise.resolve({ ok: false, why: 'not an http(s) URL', permanent: true });
  return new Promise((resolve) => {
    let req: ClientRequest | undefined;
    let settled = false;
    const settle = (outcome: PostOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      req?.destroy();
      resolve(outcome);
    };
    const deadline = setTimeout(() => settle({ ok: false, why: `no answer within ${timeoutMs} ms` }), timeoutMs);
    checkedAddress(target.host, allowPrivate).then(
      (address) => {
        if (settled) return;
        const options = {
          host: address,
          port: target.port,
          path: target.path,
          method: 'POST',
          agent: false as const,
          headers: { host: target.authority, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization, 'user-agent': 'tessera-relay webhooks' },
          ...(target.secure && isIP(target.host) === 0 ? { servername: target.host } : {}),
        };
        const onResponse = (res: IncomingMessage) => {
          const status = res.statusCode ?? 0;
          settle(status >= 200 && status < 300 ? { ok: true } : { ok: false, why: `answered ${status}` });
        };
        req = target.secure ? httpsRequest(options, onResponse) : httpRequest(options, onResponse);
        req.on('error', (err) => settle({ ok: false, why: err.message }));
        req.end(body);
      },
      (err: unknown) =>
        settle(err instanceof PrivateTargetError ? { ok: false, why: 'a private or loopback address (see --allow-private-webhooks)', permanent: true } : { ok: false, why: (err as Error).message }),
    );
  });
}

import { createHash, createHmac, type KeyObject } from 'node:crypto';

/** Lifetime of a webhook's signature, seconds: each attempt is signed anew. */
export const WEBHOOK_TOKEN_TTL = 300;

const encode = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
const HEADER = encode({ alg: 'HS256', typ: 'JWT' });

/** The body's SHA-256, base64 (the `sha256` claim). */
export function bodyHash(body: string): string {
  return createHash('sha256').update(body, 'utf8').digest('base64');
}

/**
 * The `Authorization` header of a webhook: `Bearer <JWT>`, HS256 with the project's secret,
 * `iss` its API key, `sha256` the body's hash, a short `exp`.
 */
export function signWebhook(body: string, apiKey: string, key: KeyObject, now = Math.floor(Date.now() / 1000)): string {
  const input = `${HEADER}.${encode({ iss: apiKey, iat: now, exp: now + WEBHOOK_TOKEN_TTL, sha256: bodyHash(body) })}`;
  return `Bearer ${input}.${createHmac('sha256', key).update(input).digest('base64url')}`;
}

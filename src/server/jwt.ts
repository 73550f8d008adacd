/** HS256 JSON Web Tokens for `tessera/server`: signing, and verifying what the relay signed. */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { isRecord } from '../protocol/parse.ts';

const encode = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
const HEADER = encode({ alg: 'HS256', typ: 'JWT' });

/** Sign `claims` with HS256 and `secret`. */
export function signJwt(claims: Record<string, unknown>, secret: string): string {
  const input = `${HEADER}.${encode(claims)}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}

/** Why a token was not accepted. */
export type JwtProblem = 'malformed' | 'unsupported-algorithm' | 'unknown-api-key' | 'bad-signature';

/**
 * The claims of an HS256 token whose signature matches the secret of its `iss` (looked up with
 * `secretOf`), or the problem. Time claims are the caller's to check.
 */
export function verifyJwt(token: string, secretOf: (apiKey: string) => string | undefined): { ok: true; claims: Record<string, unknown> } | { ok: false; problem: JwtProblem } {
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((p) => /^[A-Za-z0-9_-]+$/.test(p))) return { ok: false, problem: 'malformed' };
  const [header, payload, signature] = parts as [string, string, string];
  const json = (part: string): Record<string, unknown> | null => {
    try {
      const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
      return isRecord(value) ? value : null;
    } catch {
      return null;
    }
  };
  const head = json(header);
  const claims = json(payload);
  if (!head || !claims) return { ok: false, problem: 'malformed' };
  if (head.alg !== 'HS256' || head.crit !== undefined) return { ok: false, problem: 'unsupported-algorithm' };
  const secret = typeof claims.iss === 'string' ? secretOf(claims.iss) : undefined;
  if (secret === undefined) return { ok: false, problem: 'unknown-api-key' };
  const expected = createHmac('sha256', secret).update(`${header}.${payload}`).digest();
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, problem: 'bad-signature' };
  return { ok: true, claims };
}

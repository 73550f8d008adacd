import { jwtDecode } from 'jwt-decode';
import { isRecord } from './protocol/parse.ts';

/**
 * Read the claims of a token without verifying it — for information only (the identity it
 * pins, its room). The relay is the only judge of a token; nothing is refused here: a token
 * that cannot be read has no claims.
 */
export function peekClaims(token: string): Record<string, unknown> {
  // a shared audience token is joined with many times by one process (bots, load tests)
  if (token === last.token) return last.claims;
  const claims = decode(token);
  last = { token, claims };
  return claims;
}

let last: { token: string; claims: Record<string, unknown> } = { token: '', claims: {} };

function decode(token: string): Record<string, unknown> {
  try {
    const value: unknown = jwtDecode(token);
    return isRecord(value) ? value : {};
  } catch {
    return {};
  }
}

import { isRecord } from './protocol/parse.ts';

/**
 * Read the claims of a token without verifying it — for information only (the identity it
 * pins, its room). The relay is the only judge of a token; nothing is refused here.
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
  const part = token.split('.')[1];
  if (!part) return {};
  try {
    const base64 = part.replace(/-/g, '+').replace(/_/g, '/');
    const binary = atob(base64 + '='.repeat((4 - (base64.length % 4)) % 4));
    const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    const value: unknown = JSON.parse(new TextDecoder().decode(bytes));
    return isRecord(value) ? value : {};
  } catch {
    return {};
  }
}

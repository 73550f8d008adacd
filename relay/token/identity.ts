import type { TokenClaims } from '../../src/protocol/grant.ts';

/**
 * What a token means, independent of its encoding: `iss` + `jti` when it has a `jti`, else
 * its decoded signature bytes. Base64url has several spellings of the same bytes (the last
 * character's spare bits), so a ban on the signature *text* is dodged by changing one letter;
 * a ban on this key is not.
 */
export function tokenKey(token: string, claims: Pick<TokenClaims, 'iss' | 'jti'>): string {
  if (claims.jti !== undefined) return `jti:${claims.iss}:${claims.jti}`;
  const signature = token.slice(token.lastIndexOf('.') + 1);
  return `sig:${Buffer.from(signature, 'base64url').toString('hex')}`;
}

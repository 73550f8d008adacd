import { SdkError } from '../errors.ts';
import { signJwt } from './jwt.ts';
import { claimShapeProblem, hasPrivilegedFlag, type Grant, type JoinPolicy, type TokenClaims } from '../protocol/grant.ts';

/** What {@link mintToken} needs: your API key and secret, the claims, and a lifetime. */
export interface MintOptions {
  /** The API key; goes in `iss`. */
  apiKey: string;
  /** The API secret; never leaves your backend. */
  secret: string;
  /** The capabilities. Missing flags are false, except `canSubscribeData`. */
  grant: Grant;
  /** Scope the token to one room. Omit for a domain-wide token (no privileged flags). */
  roomId?: string;
  /** Pin the identity. Omit to let each joiner get a fresh one. */
  participantId?: string;
  /** Audience tier (count only, never rostered). */
  isViewer?: boolean;
  /** `{ mode: 'ask', ttl }` sends the joiner to the lobby (ttl in seconds). */
  joinPolicy?: JoinPolicy;
  /** Lifetime: seconds, or a string such as `'90s'`, `'15m'`, `'1h'`, `'1d'`. Default 1 hour. */
  ttl?: number | string;
  /** Not valid before this many seconds from now. */
  notBefore?: number;
  /** A unique token id. */
  jti?: string;
  /** The clock, in unix seconds (for tests). */
  now?: number;
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** The longest token minted: a join frame carries it, and the relay reads join frames of 16 KiB. */
export const MAX_TOKEN_LENGTH = 8192;

/** Parse a lifetime (`3600`, `'90s'`, `'15m'`, `'1h'`, `'2d'`) into seconds. */
export function parseTtl(ttl: number | string): number {
  if (typeof ttl === 'number') {
    if (Number.isFinite(ttl) && ttl > 0) return ttl;
  } else if (typeof ttl === 'string') {
    const match = /^(\d+(?:\.\d+)?)\s*([smhd]?)$/.exec(ttl.trim());
    if (match) {
      const seconds = Number(match[1]) * (UNITS[match[2] || 's'] ?? 1);
      // four hundred nines are Infinity seconds: an `exp` JSON writes as null
      if (Number.isFinite(seconds) && seconds > 0) return seconds;
    }
  }
  throw new SdkError('INVALID_ARGUMENT', `ttl must be a positive number of seconds or a string like '15m' or '1h', got ${JSON.stringify(ttl)}`);
}

/**
 * Mint a Tessera access token (HS256) on your backend. Refuses, with an {@link SdkError}
 * carrying the code the relay would answer, what the relay would refuse anyway: malformed
 * claims, a privileged grant without a room, and `ask` together with `canModerate`.
 *
 * @example
 * ```ts
 * import { mintToken } from 'tessera/server';
 *
 * const token = mintToken({
 *   apiKey: process.env.TESSERA_API_KEY!,
 *   secret: process.env.TESSERA_API_SECRET!,
 *   roomId: 'town-hall',
 *   participantId: user.id,
 *   grant: { canPublish: true, canSubscribe: true, canPublishData: true },
 *   ttl: '2h',
 * });
 * ```
 */
export function mintToken(options: MintOptions): string {
  if (typeof options !== 'object' || options === null) throw new SdkError('INVALID_ARGUMENT', 'mintToken takes an options object');
  if (typeof options.apiKey !== 'string' || options.apiKey.length === 0) {
    throw new SdkError('INVALID_ARGUMENT', 'apiKey must be a non-empty string');
  }
  if (typeof options.secret !== 'string' || options.secret.length === 0) {
    throw new SdkError('INVALID_ARGUMENT', 'secret must be a non-empty string');
  }
  for (const name of ['now', 'notBefore'] as const) {
    const value = options[name];
    if (value !== undefined && !(typeof value === 'number' && Number.isFinite(value))) throw new SdkError('INVALID_ARGUMENT', `${name} must be a finite number of seconds`);
  }
  const now = Math.floor(options.now ?? Date.now() / 1000);
  const claims: TokenClaims = {
    iss: options.apiKey,
    iat: now,
    exp: now + Math.ceil(parseTtl(options.ttl ?? 3600)),
    grant: options.grant,
    ...(options.roomId === undefined ? {} : { roomId: options.roomId }),
    ...(options.participantId === undefined ? {} : { participantId: options.participantId }),
    ...(options.isViewer === undefined ? {} : { isViewer: options.isViewer }),
    ...(options.joinPolicy === undefined ? {} : { joinPolicy: options.joinPolicy }),
    ...(options.notBefore === undefined ? {} : { nbf: now + options.notBefore }),
    ...(options.jti === undefined ? {} : { jti: options.jti }),
  };
  const problem = claimShapeProblem(claims as unknown as Record<string, unknown>);
  if (problem) throw new SdkError('INVALID_TOKEN', `${problem.claim} ${problem.problem}`, { reason: 'bad-claim' });
  if (claims.roomId === undefined && hasPrivilegedFlag(claims.grant)) {
    throw new SdkError(
      'INVALID_TOKEN',
      'a token without roomId may not carry canModerate, canRecord, canHls or canLivestream: set roomId',
      { reason: 'privileged-grant-needs-room' },
    );
  }
  if (claims.joinPolicy?.mode === 'ask' && claims.grant.canModerate === true) {
    throw new SdkError('INVALID_ENTRY_CLAIM', "a token with joinPolicy mode 'ask' cannot carry canModerate", {
      reason: 'ask-with-moderate',
    });
  }
  // times past what a double holds exactly would not mean the moment they say (a fractional nbf is fine)
  for (const claim of ['exp', 'nbf'] as const) {
    const value = claims[claim];
    if (value !== undefined && !(Math.abs(value) <= Number.MAX_SAFE_INTEGER)) throw new SdkError('INVALID_ARGUMENT', `${claim} comes to ${value}: give a shorter ttl or notBefore`);
  }
  let token: string;
  try {
    token = signJwt(claims as unknown as Record<string, unknown>, options.secret);
  } catch (err) {
    // a grant holding what JSON cannot write (a BigInt, a cycle) among its extra keys
    throw new SdkError('INVALID_TOKEN', `the claims cannot be written as JSON (${(err as Error).message})`, { reason: 'bad-claim', cause: err });
  }
  if (token.length > MAX_TOKEN_LENGTH) {
    throw new SdkError('INVALID_TOKEN', `the token is ${token.length} characters; the relay reads join frames of 16 KiB, so tokens are at most ${MAX_TOKEN_LENGTH} (a long jti or grant?)`, { reason: 'bad-claim' });
  }
  return token;
}

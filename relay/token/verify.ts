import { createHmac, timingSafeEqual } from 'node:crypto';
import { wireError, type ErrorCode, type ErrorReason, type WireError } from '../../src/protocol/codes.ts';
import { claimShapeProblem, hasPrivilegedFlag, type TokenClaims } from '../../src/protocol/grant.ts';
import { isRecord } from '../../src/protocol/parse.ts';
import type { KeyStore } from './keys.ts';

/** A refused token: the code, a machine reason and a human message. */
export type Refusal = WireError & { reason: ErrorReason };

/** The outcome of a verification. */
/** The outcome of a verification; a good token names the project of its API key. */
export type Verified = { ok: true; claims: TokenClaims; project: string } | ({ ok: false } & Refusal);

/** What a verification needs besides the token. */
export interface VerifyOptions {
  keys: KeyStore;
  /** Largest `exp - now` (seconds) for a token with `roomId`. */
  maxTtlRoom: number;
  /** Largest `exp - now` (seconds) for a token without `roomId`. */
  maxTtlDomain: number;
  /** Clock skew allowed on `exp` and `nbf`, in seconds. */
  leeway?: number;
  /** Current time in unix seconds (for tests). */
  now?: number;
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;
const LEEWAY = 30;

const refusal = (code: ErrorCode, reason: ErrorReason, message: string): { ok: false } & Refusal => ({ ok: false, ...wireError(code, message), reason });
const refuse: (code: ErrorCode, reason: ErrorReason, message: string) => Verified = refusal;
const malformed = (message: string) => refusal('INVALID_TOKEN', 'malformed', message);

function isBase64url(part: string): boolean {
  return part.length % 4 !== 1 && BASE64URL.test(part);
}

function decodeJsonObject(part: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return isRecord(value) ? value : null;
  } catch {
    return null;
  }
}

// Almost every token carries one of a handful of header strings: those of tokens whose signature
// held are remembered as good (anyone's junk headers, remembered first, kept the real ones out)
const goodHeaders = new Set<string>();
const MAX_REMEMBERED_HEADERS = 64;

/** Whether a header is remembered as good (for tests). */
export function headerRemembered(part: string): boolean {
  return goodHeaders.has(part);
}

function checkHeader(part: string): ({ ok: false } & Refusal) | null {
  if (goodHeaders.has(part)) return null;
  const header = decodeJsonObject(part);
  let verdict: ({ ok: false } & Refusal) | null = null;
  if (!header) verdict = malformed('the token header is not a JSON object');
  else if (header.alg !== 'HS256') {
    verdict = refusal('INVALID_TOKEN', 'unsupported-algorithm', `alg must be HS256, got ${JSON.stringify(header.alg ?? null)}`);
  } else if (header.crit !== undefined) {
    verdict = refusal('INVALID_TOKEN', 'unsupported-header', 'the crit header is not supported');
  }
  return verdict;
}

const isFiniteNumber = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

/** A token whose signature, issuer and time are good: its payload, not yet read further. */
type Signed = { ok: true; payload: Record<string, unknown>; exp: number; now: number; project: string; apiKey: string };

/**
 * Steps 1–4 of DECISIONS.md ("Token validation"), shared by every kind of token: shape,
 * issuer (and its project), signature in constant time, time with the leeway.
 */
function verifySigned(token: unknown, options: VerifyOptions): Signed | ({ ok: false } & Refusal) {
  // 1. shape
  if (typeof token !== 'string' || token.length === 0) return refusal('INVALID_TOKEN', 'missing', 'no token was given');
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first < 0 || second < 0 || token.indexOf('.', second + 1) >= 0) {
    return refusal('INVALID_TOKEN', 'malformed', 'a token has three dot-separated parts');
  }
  const headerPart = token.slice(0, first);
  const payloadPart = token.slice(first + 1, second);
  const signaturePart = token.slice(second + 1);
  // an empty signature is a shape (the usual `alg: none` token): the header says what is wrong with it
  if (!isBase64url(headerPart) || !isBase64url(payloadPart) || (signaturePart !== '' && !isBase64url(signaturePart))) {
    return refusal('INVALID_TOKEN', 'malformed', 'each part of a token is base64url without padding');
  }
  const headerVerdict = checkHeader(headerPart);
  if (headerVerdict) return headerVerdict;
  const payload = decodeJsonObject(payloadPart);
  if (!payload) return refusal('INVALID_TOKEN', 'malformed', 'the token payload is not a JSON object');

  // 2. issuer
  const iss = payload.iss;
  if (typeof iss !== 'string' || iss.length === 0) return refusal('INVALID_TOKEN', 'missing-issuer', 'iss (the API key) is missing');
  const status = options.keys.status(iss);
  if (status.state === 'revoked') return refusal('INVALID_API_KEY', 'revoked-api-key', 'the API key has been revoked');
  if (status.state === 'unknown') return refusal('INVALID_API_KEY', 'unknown-api-key', 'the API key is not known to this relay');

  // 3. signature, compared in constant time
  const expected = createHmac('sha256', status.key).update(token.slice(0, second)).digest();
  const given = Buffer.from(signaturePart, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return refusal('INVALID_TOKEN', 'bad-signature', 'the token signature does not match');
  }
  if (goodHeaders.size < MAX_REMEMBERED_HEADERS) goodHeaders.add(headerPart);

  // 4. time
  const now = options.now ?? Date.now() / 1000;
  const leeway = options.leeway ?? LEEWAY;
  const { exp, nbf } = payload;
  if (!isFiniteNumber(exp)) return refusal('INVALID_TOKEN', 'malformed', 'exp must be a number of unix seconds');
  if (now > exp + leeway) return refusal('INVALID_TOKEN', 'expired', 'the token has expired');
  if (nbf !== undefined) {
    if (!isFiniteNumber(nbf)) return refusal('INVALID_TOKEN', 'malformed', 'nbf must be a number of unix seconds');
    if (nbf > now + leeway) return refusal('INVALID_TOKEN', 'not-yet-valid', 'the token is not valid yet (nbf)');
  }
  return { ok: true, payload, exp, now, project: status.project, apiKey: iss };
}

/**
 * Verify a token, steps 1–8 of DECISIONS.md ("Token validation"); the first failing step
 * decides the code. Steps 9 and 10 depend on the room and identity being joined and live in
 * {@link checkScope}. A server-API token (`admin: true`) is never a participant's.
 */
export function verifyToken(token: unknown, options: VerifyOptions): Verified {
  const signed = verifySigned(token, options);
  if (!signed.ok) return signed;
  const { payload, exp, now } = signed;
  if (payload.admin === true) return refuse('INVALID_TOKEN', 'admin-token', 'a server-API token (admin) cannot join a room or download from it');

  // 5. claim shapes
  const problem = claimShapeProblem(payload);
  if (problem) return refuse('INVALID_TOKEN', 'bad-claim', `${problem.claim} ${problem.problem}`);
  const claims = payload as unknown as TokenClaims;

  // 6. lifetime ceiling of its scope
  const roomScoped = claims.roomId !== undefined;
  const ceiling = roomScoped ? options.maxTtlRoom : options.maxTtlDomain;
  if (exp - now > ceiling) {
    return refuse(
      'INVALID_TOKEN',
      'lifetime-too-long',
      `a ${roomScoped ? 'room-scoped' : 'domain-wide'} token may live at most ${ceiling} s`,
    );
  }

  // 7. privileged grants need a room
  if (!roomScoped && hasPrivilegedFlag(claims.grant)) {
    return refuse(
      'INVALID_TOKEN',
      'privileged-grant-needs-room',
      'a token without roomId may not carry canModerate, canRecord, canHls or canLivestream',
    );
  }

  // 8. an ask-mode token may not moderate
  if (claims.joinPolicy?.mode === 'ask' && claims.grant.canModerate === true) {
    return refuse('INVALID_ENTRY_CLAIM', 'ask-with-moderate', "joinPolicy mode 'ask' cannot be combined with canModerate");
  }
  return { ok: true, claims, project: signed.project };
}

/**
 * Steps 9 and 10: the room and the identity being joined against what the token pins.
 * Returns `null` when the token allows them.
 */
export function checkScope(claims: TokenClaims, roomId: string, participantId: string): Refusal | null {
  if (claims.roomId !== undefined && claims.roomId !== roomId) {
    return { code: 'UNAUTHORIZED_ROOM', kind: 'Auth', reason: 'room-mismatch', message: `this token is for another room than "${roomId}"` };
  }
  if (claims.participantId !== undefined && claims.participantId !== participantId) {
    return {
      code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth',
      reason: 'participant-mismatch',
      message: 'this token pins another participantId than the one joining',
    };
  }
  return null;
}

/** A server-API token that passed: the project it acts for and the API key that signed it. */
export type AdminVerified = { ok: true; project: string; apiKey: string } | ({ ok: false } & Refusal);

/**
 * Verify a server-API token: steps 1–4 as for any token (revoked keys, signature, leeway),
 * then `admin: true` (a participant's token is refused with `INVALID_PERMISSIONS`) and a
 * lifetime of at most `maxTtl` seconds.
 */
export function verifyAdminToken(token: unknown, options: Omit<VerifyOptions, 'maxTtlRoom' | 'maxTtlDomain'> & { maxTtl: number }): AdminVerified {
  const signed = verifySigned(token, { ...options, maxTtlRoom: options.maxTtl, maxTtlDomain: options.maxTtl });
  if (!signed.ok) return signed;
  if (signed.payload.admin !== true) return refusal('INVALID_PERMISSIONS', 'admin-required', 'the server API needs a server-API token (admin: true), not a participant token');
  if (signed.exp - signed.now > options.maxTtl) return refusal('INVALID_TOKEN', 'lifetime-too-long', `a server-API token may live at most ${options.maxTtl} s`);
  return { ok: true, project: signed.project, apiKey: signed.apiKey };
}

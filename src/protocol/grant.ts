/** Grant, token claims and their shape rules (DECISIONS.md, "Token validation" step 5). */
import { ID_CONTROL_RANGES, idControl, isWellFormed, MAX_ID_LENGTH } from './text.ts';

/** A media source a participant may publish. */
export type Source = 'camera' | 'microphone' | 'screen';
/** Every media source, in a fixed order. */
export const SOURCES: readonly Source[] = Object.freeze(['camera', 'microphone', 'screen']);

/** The eleven boolean capability flags of a grant. */
export const GRANT_FLAGS = Object.freeze([
  'canPublish',
  'canSubscribe',
  'canPublishData',
  'canSubscribeData',
  'canRecord',
  'canHls',
  'canLivestream',
  'canTranscribe',
  'canWhiteboard',
  'canModerate',
] as const);
/** The name of a boolean capability flag. */
export type GrantFlag = (typeof GRANT_FLAGS)[number];

/** Flags a token without `roomId` may not carry. */
export const PRIVILEGED_FLAGS: readonly GrantFlag[] = Object.freeze([
  'canModerate',
  'canRecord',
  'canHls',
  'canLivestream',
]);

/**
 * The capability object inside a token, as written by the minting backend.
 * A missing flag is `false`, except `canSubscribeData` (default `true`);
 * a missing `canPublishSources` allows all three sources.
 */
export type Grant = { [F in GrantFlag]?: boolean } & { canPublishSources?: Source[] };

/** A grant with every default applied: what the relay enforces. */
export type EffectiveGrant = { [F in GrantFlag]: boolean } & { canPublishSources: Source[] };

/** Entry behaviour of a token: straight in, or wait in the lobby (`ttl` in seconds). */
export type JoinPolicy = { mode: 'direct' } | { mode: 'ask'; ttl?: number };

/** The claims of a Tessera access token (the JWT payload). */
export interface TokenClaims {
  iss: string;
  exp: number;
  grant: Grant;
  roomId?: string;
  participantId?: string;
  isViewer?: boolean;
  joinPolicy?: JoinPolicy;
  iat?: number;
  nbf?: number;
  jti?: string;
}

/** Apply the grant defaults. */
export function effectiveGrant(grant: Grant): EffectiveGrant {
  const out = {} as EffectiveGrant;
  for (const flag of GRANT_FLAGS) out[flag] = grant[flag] ?? flag === 'canSubscribeData';
  out.canPublishSources = grant.canPublishSources ? [...grant.canPublishSources] : [...SOURCES];
  return out;
}

/** A reason for a malformed claim: which claim, and what is wrong. */
export interface ClaimProblem {
  claim: string;
  problem: string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function nonEmptyString(value: unknown): boolean {
  return typeof value === 'string' && value.length > 0;
}

/**
 * Check the shapes of the claims that carry meaning (step 5). Returns the first problem, or
 * `null`. Unknown claims and unknown grant keys are ignored. `iss`, `exp` and `nbf` are
 * checked earlier in the validation order and are not repeated here.
 */
export function claimShapeProblem(payload: Record<string, unknown>): ClaimProblem | null {
  const grant = payload.grant;
  if (!isRecord(grant)) return { claim: 'grant', problem: 'must be an object' };
  for (const flag of GRANT_FLAGS) {
    const value = grant[flag];
    if (value !== undefined && typeof value !== 'boolean') {
      return { claim: `grant.${flag}`, problem: 'must be a boolean' };
    }
  }
  const sources = grant.canPublishSources;
  if (
    sources !== undefined &&
    !(Array.isArray(sources) && sources.every((s) => SOURCES.includes(s as Source)))
  ) {
    return { claim: 'grant.canPublishSources', problem: 'must be an array of camera|microphone|screen' };
  }
  if (payload.isViewer !== undefined && typeof payload.isViewer !== 'boolean') {
    return { claim: 'isViewer', problem: 'must be a boolean' };
  }
  for (const claim of ['roomId', 'participantId', 'jti'] as const) {
    const value = payload[claim];
    if (value !== undefined && !(nonEmptyString(value) && isWellFormed(value as string))) {
      return { claim, problem: 'must be a non-empty, well-formed string' };
    }
    if (claim === 'jti' || typeof value !== 'string') continue;
    // an id the join frame could never name: refused at mint time, not at every join
    if (value.length > MAX_ID_LENGTH) return { claim, problem: `must be at most ${MAX_ID_LENGTH} characters (it has ${value.length})` };
    // ids are shown (rosters, dashboards, logs): no control, bidi control or invisible characters
    const control = idControl(value);
    if (control !== null) {
      return { claim, problem: `must not hold control, bidi control or invisible characters (${ID_CONTROL_RANGES}): it holds ${control}` };
    }
  }
  if (payload.iat !== undefined && !Number.isFinite(payload.iat)) {
    return { claim: 'iat', problem: 'must be a finite number' };
  }
  const policy = payload.joinPolicy;
  if (policy !== undefined && !isJoinPolicy(policy)) {
    return { claim: 'joinPolicy', problem: "must be {mode:'direct'} or {mode:'ask', ttl?: positive number}" };
  }
  return null;
}

function isJoinPolicy(value: unknown): value is JoinPolicy {
  if (!isRecord(value)) return false;
  if (value.mode === 'direct') return true;
  if (value.mode !== 'ask') return false;
  const ttl = value.ttl;
  return ttl === undefined || (typeof ttl === 'number' && Number.isFinite(ttl) && ttl > 0);
}

/** True when a token without `roomId` carries a flag only room-scoped tokens may carry. */
export function hasPrivilegedFlag(grant: Grant): boolean {
  return PRIVILEGED_FLAGS.some((flag) => grant[flag] === true);
}

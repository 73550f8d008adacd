import { TokenBucket } from '../data/token-bucket.ts';
import { BucketMap } from '../data/bucket-map.ts';
// an arrival or departure told to a member is charged as any room-wide event is
import { BROADCAST_CHARGED_MEMBERS, BROADCAST_EVENT_BYTES } from '../data/fanout-budget.ts';


/** The key a member's token is known by in {@link PresenceBudgets}: its project and signature. */
export function presenceKey(member: { readonly project: string; readonly tokenKey: string }): string {
  return `${member.project}\n${member.tokenKey}`;
}

/** The limits of {@link PresenceBudgets} (the relay's configuration has them). */
export interface PresenceLimits {
  presenceByteRate: number;
  presenceByteBurst: number;
}

/**
 * What a token's members make the relay tell their rooms by coming and going: every on-stage
 * arrival and departure is an event to every other member, so a token that joins and leaves in
 * a loop would have the relay write a room of a thousand two thousand frames a round without
 * spending any member's budget (each arrival is a new member). Per token (its project and
 * signature, as the scheduler's flows), since that is what joins again. A departure is charged
 * for itself and its arrival, and never refused; an arrival is refused while the token is in
 * debt. So a room filling up with one shared token's members costs that token nothing (each
 * arrival is paid when it leaves), and a token that keeps coming and going pays for every round.
 * A token whose budget has refilled is forgotten, so what is kept is bounded by the tokens that
 * left within a refill's time.
 */
export class PresenceBudgets {
  private readonly buckets: BucketMap;

  constructor(limits: PresenceLimits, now: () => number = () => performance.now()) {
    this.buckets = new BucketMap(() => new TokenBucket(limits.presenceByteRate, limits.presenceByteBurst, now), 4096);
  }

  /** Tokens remembered (for tests and metrics). */
  get size(): number {
    return this.buckets.size;
  }

  /** Whether a member of token `key` may arrive on stage now: false while its announcements are in debt. */
  mayAnnounce(key: string): boolean {
    return this.buckets.peek(key)?.hasCredit() ?? true;
  }

  /** Milliseconds until token `key` may announce again (0: now). */
  msUntilCredit(key: string): number {
    return this.buckets.peek(key)?.msUntilToken(0) ?? 0;
  }

  /**
   * Events of a member of token `key` (an arrival and its departure), of `bytes` each, were told
   * to `recipients` members: each is charged at least as any room-wide event is.
   */
  charge(key: string, bytes: readonly number[], recipients: number): void {
    let each = 0;
    for (const n of bytes) each += Math.max(BROADCAST_EVENT_BYTES, n);
    this.buckets.get(key).spend(each * Math.min(Math.max(1, recipients), BROADCAST_CHARGED_MEMBERS));
  }
}

import { TokenBucket } from './token-bucket.ts';

/** What a room-wide event of a request is counted as (bytes per copy, about its size): a mute, a cleared board, an output's state. */
export const BROADCAST_EVENT_BYTES = 128;
/**
 * The most members an event is charged for: in a webinar of 100,000, a presenter's publishes on
 * a reconnection must not each cost seconds of its budget (the message rate bounds them too).
 */
export const BROADCAST_CHARGED_MEMBERS = 8192;

/**
 * The least a copy is counted as, in bytes: a copy costs the relay a frame and a write whatever
 * its size. Counted by its bytes alone, a stream of one-byte chunks to a thousand members made
 * 288,000 frames a second and held the relay's core 92–99 % busy on a ninth of its budget.
 */
export const COPY_FLOOR_BYTES = 256;

/** The limits of a {@link FanoutBudget} (the relay's configuration has them). */
export interface FanoutLimits {
  fanoutByteRate: number;
  fanoutByteBurst: number;
  broadcastByteRate: number;
  broadcastByteBurst: number;
}

/**
 * What a member's sends may make the relay write to others, in two measures. Every copy counts
 * against the fan-out rate (a file streamed to one peer is one copy per byte, as fast as that
 * rate). The copies past the first count again against the broadcast rate: a 36 KB stroke to a
 * room of a thousand is 36 MB of writes from 36 KB read, and that amplification, not the bytes of
 * a point-to-point transfer, is what a member must not aim at the relay at full speed. Both are
 * debts (a single send may cost more than a burst) paid back before the next send.
 */
export class FanoutBudget {
  private readonly copies: TokenBucket;
  private readonly extra: TokenBucket;

  constructor(limits: FanoutLimits, now?: () => number) {
    this.copies = new TokenBucket(limits.fanoutByteRate, limits.fanoutByteBurst, now);
    this.extra = new TokenBucket(limits.broadcastByteRate, limits.broadcastByteBurst, now);
  }

  /** True while neither measure is in debt. */
  hasCredit(): boolean {
    return this.copies.hasCredit() && this.extra.hasCredit();
  }

  /**
   * `bytes` went to `recipients` (a chunk nobody receives was still read: count it as one copy);
   * each copy counts at least {@link COPY_FLOOR_BYTES}.
   */
  spend(bytes: number, recipients: number): void {
    const copies = Math.max(1, recipients);
    const each = Math.max(bytes, COPY_FLOOR_BYTES);
    this.copies.spend(each * copies);
    if (copies > 1) this.extra.spend(each * (copies - 1));
  }

  /** Milliseconds until both measures hold `n` tokens (0: now). */
  msUntilToken(n = 0): number {
    return Math.max(this.copies.msUntilToken(n), this.extra.msUntilToken(n));
  }
}

/** The default clock of buckets: one function for all of them, not a closure each (a connection has three buckets). */
const monotonicNow = (): number => performance.now();

/** A token bucket: `rate` tokens per second, at most `burst` saved up. */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly rate: number,
    private readonly burst: number,
    private readonly now: () => number = monotonicNow,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  private refill(): void {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = now;
  }

  /** Take `n` tokens (default one); false, taking none, when the bucket has fewer. */
  take(n = 1): boolean {
    this.refill();
    if (this.tokens < n) return false;
    this.tokens -= n;
    return true;
  }

  /** Take as many of `n` tokens as there are whole ones (a request served in part); how many were taken. */
  takeUpTo(n: number): number {
    this.refill();
    const taken = Math.max(0, Math.min(n, Math.floor(this.tokens)));
    this.tokens -= taken;
    return taken;
  }

  /** Give back `n` tokens taken for what was not done (never beyond the burst). */
  give(n: number): void {
    this.refill();
    this.tokens = Math.min(this.burst, this.tokens + n);
  }

  /**
   * Spend `n` tokens whatever the balance, going into debt: for costs larger than a burst
   * (a message fanned out to ten thousand members), paid back at `rate` before `hasCredit`.
   */
  spend(n: number): void {
    this.refill();
    this.tokens -= n;
  }

  /** True when the bucket holds its whole burst (it is as good as a new one). */
  get full(): boolean {
    this.refill();
    return this.tokens >= this.burst;
  }

  /** True while the balance is not in debt. */
  hasCredit(): boolean {
    this.refill();
    return this.tokens >= 0;
  }

  /** Milliseconds until `n` tokens are there (0 when they are). */
  msUntilToken(n = 1): number {
    this.refill();
    return this.tokens >= n ? 0 : ((n - this.tokens) / this.rate) * 1000;
  }
}

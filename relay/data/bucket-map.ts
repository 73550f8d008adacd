import type { TokenBucket } from './token-bucket.ts';

/** Keys remembered before the full buckets are first forgotten. */
const PRUNE_AT = 1024;

/**
 * Token buckets by key (a token, a room's output), made on first use. A bucket that is full again
 * is the same as a new one, so the full ones are forgotten whenever the map has doubled since the
 * last pass: what is kept is bounded by the keys active within a refill's time, and a pass is
 * paid for by as many new keys.
 */
export class BucketMap {
  private readonly buckets = new Map<string, TokenBucket>();
  private pruneAt: number;

  constructor(
    private readonly make: () => TokenBucket,
    private readonly first = PRUNE_AT,
  ) {
    this.pruneAt = first;
  }

  /** Buckets remembered (for tests and metrics). */
  get size(): number {
    return this.buckets.size;
  }

  /** The bucket of `key`, if one is remembered. */
  peek(key: string): TokenBucket | undefined {
    return this.buckets.get(key);
  }

  /** The bucket of `key`, made if there is none. */
  get(key: string): TokenBucket {
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= this.pruneAt) {
        for (const [k, b] of this.buckets) if (b.full) this.buckets.delete(k);
        this.pruneAt = Math.max(this.first, 2 * this.buckets.size);
      }
      bucket = this.make();
      this.buckets.set(key, bucket);
    }
    return bucket;
  }
}

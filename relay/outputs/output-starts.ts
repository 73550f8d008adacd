import { TokenBucket } from '../data/token-bucket.ts';

/** Rooms' outputs whose starts are remembered before the full ones are first forgotten. */
const PRUNE_AT = 1024;

/**
 * Starts of each output of each room, per minute (`--output-starts`), kept by the relay rather
 * than by the room: a room is made again whenever someone joins it after it emptied, so a budget
 * of the room's own would start full again at every rejoin. Each start of a media output runs
 * ffmpeg and makes a directory. A budget that is whole again is forgotten, so what is kept is
 * bounded by the outputs started within a minute.
 */
export class OutputStarts {
  private readonly buckets = new Map<string, TokenBucket>();
  /** The size at which the full ones are next forgotten: twice what the last pass kept. */
  private pruneAt = PRUNE_AT;

  constructor(
    /** Starts a minute, and at most this many at once. */
    readonly perMinute: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Budgets remembered (for tests). */
  get size(): number {
    return this.buckets.size;
  }

  /** Take one start of `output` in the room; false when its budget is spent. */
  take(project: string, roomId: string, output: string): boolean {
    const key = `${project}\u0000${roomId}\u0000${output}`;
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= this.pruneAt) this.prune();
      bucket = new TokenBucket(this.perMinute / 60, this.perMinute, this.now);
      this.buckets.set(key, bucket);
    }
    return bucket.take();
  }

  private prune(): void {
    for (const [key, bucket] of this.buckets) if (bucket.full) this.buckets.delete(key);
    this.pruneAt = Math.max(PRUNE_AT, 2 * this.buckets.size);
  }
}

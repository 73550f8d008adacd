import { BucketMap } from '../data/bucket-map.ts';
import { TokenBucket } from '../data/token-bucket.ts';

/**
 * Starts of each output of each room, per minute (`--output-starts`), kept by the relay rather
 * than by the room: a room is made again whenever someone joins it after it emptied, so a budget
 * of the room's own would start full again at every rejoin. Each start of a media output runs
 * ffmpeg and makes a directory. A budget that is whole again is forgotten, so what is kept is
 * bounded by the outputs started within a minute.
 */
export class OutputStarts {
  private readonly buckets: BucketMap;

  constructor(
    /** Starts a minute, and at most this many at once. */
    readonly perMinute: number,
    now: () => number = () => performance.now(),
  ) {
    this.buckets = new BucketMap(() => new TokenBucket(perMinute / 60, perMinute, now));
  }

  /** Budgets remembered (for tests). */
  get size(): number {
    return this.buckets.size;
  }

  /** Take one start of `output` in the room; false when its budget is spent. */
  take(project: string, roomId: string, output: string): boolean {
    return this.buckets.get(`${project}\u0000${roomId}\u0000${output}`).take();
  }
}

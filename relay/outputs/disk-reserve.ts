/**
 * The free disk space the relay leaves alone. Recordings and HLS are written for as long as a
 * member with the grant keeps them running, and nothing else bounds what they write: a relay
 * that filled its disk would take the machine's other writers (its log, Redis, the system)
 * down with it. Below the reserve, media outputs do not start (`RATE_LIMITED`, `disk-full`), and
 * the running ones fail with the same error.
 */
import { promises as fsp } from 'node:fs';
import { dirname } from 'node:path';
import { RelayError } from '../errors.ts';

/** How often running outputs' disks are looked at (ms). */
export const DISK_CHECK_MS = 2_000;

/** The free bytes of the filesystem holding `path` (of its nearest existing ancestor). */
export type FreeBytes = (path: string) => Promise<number>;

/** `statfs` of `path`, or of its nearest ancestor that exists (an output's directory is made at its first start). */
export const statfsFree: FreeBytes = async (path) => {
  for (let p = path; ; ) {
    try {
      const s = await fsp.statfs(p);
      return s.bavail * s.bsize;
    } catch (err) {
      const parent = dirname(p);
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || parent === p) throw err;
      p = parent;
    }
  }
};

/** The error of an output refused, or stopped, for want of disk. */
export const diskFull = (output: string, free: number, reserve: number) =>
  new RelayError('RATE_LIMITED', `${output}: the relay's disk is nearly full (${Math.floor(free / 1048576)} MiB free, ${Math.floor(reserve / 1048576)} MiB kept free): try again later`, 'disk-full');

/**
 * One relay's reserve: `check` before a media output starts, `watch` while it runs. The watches
 * share one timer, and each directory is looked at once a turn however many outputs write there.
 */
export class DiskReserve {
  private readonly watchers = new Map<string, Set<(free: number) => void>>();
  private timer: NodeJS.Timeout | null = null;
  private checking = false;

  /**
   * @param reserved bytes kept free (`--disk-min-free`, read at each look); 0 turns the reserve off
   */
  constructor(
    private readonly reserved: () => number,
    private readonly free: FreeBytes = statfsFree,
    private readonly intervalMs = DISK_CHECK_MS,
  ) {}

  get reserve(): number {
    return this.reserved();
  }

  /** Throws `disk-full` when the filesystem of `dir` has no more than the reserve free. */
  async check(dir: string, output: string): Promise<void> {
    if (this.reserve <= 0) return;
    const free = await this.free(dir);
    if (free <= this.reserve) throw diskFull(output, free, this.reserve);
  }

  /** Calls `low(free)` once the filesystem of `dir` is down to the reserve; the result stops watching. */
  watch(dir: string, low: (free: number) => void): () => void {
    let set = this.watchers.get(dir);
    if (!set) this.watchers.set(dir, (set = new Set()));
    const watcher = (free: number) => {
      off();
      low(free);
    };
    set.add(watcher);
    this.timer ??= setInterval(() => void this.sweep(), this.intervalMs);
    this.timer.unref();
    const off = () => {
      const s = this.watchers.get(dir);
      if (!s?.delete(watcher)) return;
      if (s.size === 0) this.watchers.delete(dir);
      if (this.watchers.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = null;
      }
    };
    return off;
  }

  /** How many outputs are watched (for tests). */
  get watching(): number {
    let n = 0;
    for (const s of this.watchers.values()) n += s.size;
    return n;
  }

  private async sweep(): Promise<void> {
    if (this.checking || this.reserve <= 0) return;
    this.checking = true;
    try {
      for (const [dir, set] of [...this.watchers]) {
        const free = await this.free(dir).catch(() => Infinity);
        if (free > this.reserve) continue;
        for (const watcher of [...set]) watcher(free);
      }
    } finally {
      this.checking = false;
    }
  }
}

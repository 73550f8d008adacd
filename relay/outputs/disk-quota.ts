/**
 * The disk space one project's recordings and HLS may take on this relay (`--disk-quota`). The
 * disk reserve (`disk-reserve.ts`) keeps the machine alive, but alone it lets one project fill
 * the shared disk down to the reserve, and then no project records. At or over its quota a
 * project's recording or HLS does not start (`RATE_LIMITED`, `disk-quota`); past it, its running
 * ones fail with the same error.
 *
 * What a project holds is counted without a walk at every look: its directories are walked (see
 * `disk-usage.ts`: asynchronous, no links followed, a bounded number of entries) at most once per
 * `walkEveryMs`, leaving out the directories of its running outputs, which are measured apart
 * (a few files each) by one timer shared by every running output of the relay. Between walks,
 * what an output left when it stopped and what a deletion freed are added to the walk's total.
 */
import { RelayError } from '../errors.ts';
import { diskUsage, OUTPUT_DIR_ENTRIES, outputDirUsage } from './disk-usage.ts';

/** How often running outputs' directories are measured (ms), as the disk reserve looks at free space. */
export const QUOTA_CHECK_MS = 2_000;
/** A project's directories are walked at most this often (ms); changes the relay makes itself are counted in between. */
export const QUOTA_WALK_MS = 60_000;
/**
 * Entries one walk of a project looks at, at most. A project whose files are more than this is
 * counted as over its quota: the relay will not spend more to prove otherwise.
 */
export const QUOTA_MAX_ENTRIES = 100_000;
/** Levels of a project's directories: room, recording, its files and `.composite/`, the composite's parts. */
const PROJECT_DEPTH = 4;

/** The directories of a project's recordings and HLS runs on this relay. */
export type ProjectDirs = (project: string) => Promise<string[]>;

const mib = (bytes: number) => (bytes < 1048576 ? `${Math.ceil(bytes / 1024)} KiB` : `${Math.ceil(bytes / 1048576)} MiB`);

/** The error of an output refused, or stopped, because its project is at its quota. */
export const overQuota = (output: string, used: number, quota: number) =>
  new RelayError(
    'RATE_LIMITED',
    `${output}: this project's recordings and HLS ${Number.isFinite(used) ? `take ${mib(used)}` : `hold more files and directories than the relay counts (${QUOTA_MAX_ENTRIES} a project, ${OUTPUT_DIR_ENTRIES} a running output)`} of the ${mib(quota)} it may keep on this relay: delete recordings to free space (DELETE /api/v1/rooms/:room/recordings/:id)`,
    'disk-quota',
  );

/** A running output's directory, counted as it grows. */
export interface QuotaWatch {
  /** Stop telling the output (it is stopping); its directory is still counted as running. */
  quiet(): void;
  /** Its files are final: measured once more and counted with the project's other files. */
  settle(): Promise<void>;
}

interface LiveDir {
  bytes: number;
  tell: ((used: number) => void) | null;
}

/** What the relay knows of one project's files. */
interface ProjectUsage {
  /** Bytes of the last walk (`Infinity` when it stopped at its entry limit), and when it began. */
  walked: { bytes: number; at: number } | null;
  walking: Promise<void> | null;
  /** The next look walks again, however recent the last walk (the last one failed). */
  stale: boolean;
  /** Bytes the relay added (outputs that stopped) or freed (deletions) since the last walk began. */
  delta: number;
  /** Running outputs' directories. */
  live: Map<string, LiveDir>;
}

/** Options of {@link DiskQuota} (tests shorten them). */
export interface DiskQuotaOptions {
  intervalMs?: number;
  walkEveryMs?: number;
  maxEntries?: number;
  /** Entries of one running output's directory looked at, at most (past them it counts as over the quota). */
  maxOutputEntries?: number;
  now?: () => number;
}

/**
 * One relay's per-project quota: `check` before a recording or HLS starts, `watch` its directory
 * while it runs, `freed` after a deletion. One timer for all watches, running only while some
 * output runs.
 */
export class DiskQuota {
  private readonly projects = new Map<string, ProjectUsage>();
  private timer: NodeJS.Timeout | null = null;
  private sweeping = false;
  private readonly intervalMs: number;
  private readonly walkEveryMs: number;
  private readonly maxEntries: number;
  private readonly maxOutputEntries: number;
  private readonly now: () => number;

  /**
   * @param quota bytes per project (`--disk-quota`, read at each look); 0 turns the quota off
   * @param dirsOf where a project's files are
   */
  constructor(
    private readonly quota: () => number,
    private readonly dirsOf: ProjectDirs,
    options: DiskQuotaOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? QUOTA_CHECK_MS;
    this.walkEveryMs = options.walkEveryMs ?? QUOTA_WALK_MS;
    this.maxEntries = options.maxEntries ?? QUOTA_MAX_ENTRIES;
    this.maxOutputEntries = options.maxOutputEntries ?? OUTPUT_DIR_ENTRIES;
    this.now = options.now ?? (() => performance.now());
  }

  /** The quota now, bytes (0: off). */
  get limit(): number {
    return this.quota();
  }

  /** Throws `disk-quota` when the project's files take its quota or more. */
  async check(project: string, output: string): Promise<void> {
    const quota = this.quota();
    if (quota <= 0) return;
    let used = await this.usage(project);
    // a deletion during the walk just waited for (an HLS restart's old run) may not be in it:
    // before refusing, one more walk (see `freed`)
    if (used >= quota && this.project(project).stale) used = await this.usage(project);
    if (used >= quota) throw overQuota(output, used, quota);
  }

  /**
   * The bytes the project's files take: its last walk (walked again when older than
   * `walkEveryMs`), what changed since, and its running outputs as last measured.
   */
  async usage(project: string): Promise<number> {
    const p = this.project(project);
    await this.fresh(project, p);
    let used = p.walked!.bytes + p.delta;
    for (const live of p.live.values()) used += live.bytes;
    return Math.max(0, used);
  }

  /**
   * Count `dir` (a running output's) as it grows, and call `over(used)` once if the project
   * passes its quota meanwhile.
   */
  watch(project: string, dir: string, over: (used: number) => void): QuotaWatch {
    const p = this.project(project);
    const live: LiveDir = { bytes: 0, tell: over };
    p.live.set(dir, live);
    this.timer ??= setInterval(() => void this.sweep(), this.intervalMs);
    this.timer.unref();
    let settled: Promise<void> | null = null;
    return {
      quiet: () => void (live.tell = null),
      settle: () =>
        (settled ??= (async () => {
          live.tell = null;
          const { bytes, complete } = await outputDirUsage(dir, this.maxOutputEntries);
          if (p.live.get(dir) !== live) return;
          p.live.delete(dir);
          p.delta += bytes;
          // more files than were looked at: the next look walks the project (and sees them all, or counts it as over)
          if (!complete) p.stale = true;
          this.stopWhenIdle();
        })()),
    };
  }

  /**
   * A deletion took `bytes` of the project's files away. During a walk the walk may or may not
   * have counted them: subtracted as well, files the walk missed were taken off twice, and the
   * project could go past its quota until the next walk. Then they count as still there (the safe
   * side) and the next look walks again. `dir`: the directory deleted, if it may be a running
   * output's.
   */
  freed(project: string, bytes: number, dir?: string): void {
    const p = this.project(project);
    // the directory of an output that has not settled yet (an HLS run deleted by the room's next
    // start right after it failed at the quota): its bytes are in `live`, not in the walk or the
    // delta. Left there, they counted until its output settled, and refused that very start
    if (dir !== undefined && p.live.delete(dir)) return;
    if (p.walking) p.stale = true;
    else p.delta -= bytes;
  }

  /** Running outputs counted (for tests). */
  get watching(): number {
    let n = 0;
    for (const p of this.projects.values()) n += p.live.size;
    return n;
  }

  private project(project: string): ProjectUsage {
    let p = this.projects.get(project);
    if (!p) this.projects.set(project, (p = { walked: null, walking: null, stale: false, delta: 0, live: new Map() }));
    return p;
  }

  /** Walk the project's directories unless a walk is recent (or under way: it is waited for). */
  private async fresh(project: string, p: ProjectUsage): Promise<void> {
    if (p.walking) return p.walking;
    if (p.walked && !p.stale && this.now() - p.walked.at < this.walkEveryMs) return;
    const at = this.now();
    const before = p.delta;
    p.stale = false;
    // skipped: outputs running when the walk begins, and those that start during it
    const runningAtStart = new Set(p.live.keys());
    const skip = { has: (path: string) => runningAtStart.has(path) || p.live.has(path) };
    p.walking = (async () => {
      let bytes = 0;
      try {
        const usage = await diskUsage(await this.dirsOf(project), { maxEntries: this.maxEntries, maxDepth: PROJECT_DEPTH, skip });
        bytes = usage.complete ? usage.bytes : Infinity;
      } catch {
        p.stale = true; // the storage could not be read: the output's own start says why; look again next time
      }
      p.walked = { bytes, at };
      // what changed before the walk began is in it; what changed since is not
      p.delta -= before;
    })().finally(() => (p.walking = null));
    return p.walking;
  }

  private stopWhenIdle(): void {
    if (this.watching > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = null;
  }

  /** Measure every running output's directory, then tell those of a project past its quota. */
  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      for (const [project, p] of [...this.projects]) {
        if (p.live.size === 0) continue;
        const quota = this.quota();
        for (const [dir, live] of [...p.live]) {
          const usage = await outputDirUsage(dir, this.maxOutputEntries);
          live.bytes = usage.bytes;
          // a running output with more entries than are looked at: its bytes are only a lower
          // bound, and the relay will not spend more to measure it. With a quota on, it alone
          // stops (the project's other outputs go on, counted with its lower bound)
          if (!usage.complete && quota > 0) tell(live, Infinity);
        }
        if (quota <= 0) continue;
        const used = await this.usage(project);
        if (used <= quota) continue;
        for (const live of [...p.live.values()]) tell(live, used);
      }
    } finally {
      this.sweeping = false;
    }
  }
}

/** Tell a running output it is over the quota, once. */
function tell(live: LiveDir, used: number): void {
  const over = live.tell;
  live.tell = null;
  over?.(used);
}

const quotas = new WeakMap<object, DiskQuota>();

/** The quota of the relay whose provider settings are `owner` (what the server API tells of a deletion). */
export function diskQuotaOf(owner: object): DiskQuota | undefined {
  return quotas.get(owner);
}

/** Make `quota` the one of the relay whose provider settings are `owner`. */
export function setDiskQuota(owner: object, quota: DiskQuota): void {
  quotas.set(owner, quota);
}

/**
 * What a set of the relay's output directories holds on disk, read without blocking the event
 * loop (every look is an asynchronous `opendir`/`lstat`) and without following a link: a link,
 * a FIFO or a device counts as one block and is never opened or entered. A walk looks at a
 * bounded number of entries and a bounded depth, so a directory tree of any size costs at most
 * that many looks.
 */
import { promises as fsp, type Dir } from 'node:fs';
import { join } from 'node:path';

/** What a file or directory is charged at least, and the unit sizes are rounded up to (a filesystem block). */
export const BLOCK = 4096;

/** The bytes an entry of `size` bytes is charged: whole blocks, at least one. */
export const charged = (size: number): number => Math.max(1, Math.ceil(size / BLOCK)) * BLOCK;

/** What a walk found. */
export interface Usage {
  /** Bytes charged (see {@link charged}). */
  bytes: number;
  /** Entries looked at (files, directories, links). */
  entries: number;
  /** False when the walk stopped at its entry limit: `bytes` is then only a lower bound. */
  complete: boolean;
}

/** How far a walk goes. */
export interface WalkLimits {
  /** Entries looked at, at most, over all the directories of one walk. */
  maxEntries: number;
  /** Levels below each directory given (its own entries are level 1). */
  maxDepth: number;
  /** Directories not to enter (each still one block), by path: the running outputs', counted apart. */
  skip?: { has(path: string): boolean };
}

/**
 * The bytes under `dirs`, each a directory of the relay's own storage (missing ones count
 * nothing). Deeper levels than `maxDepth` count one block each for their directory, unread.
 */
export async function diskUsage(dirs: readonly string[], limits: WalkLimits): Promise<Usage> {
  const usage: Usage = { bytes: 0, entries: 0, complete: true };
  for (const dir of dirs) {
    if (limits.skip?.has(dir)) continue;
    if (!(await walk(dir, 1, limits, usage))) break;
  }
  return usage;
}

/** Count the entries of `dir` into `usage`; false once the entry limit is reached. */
async function walk(dir: string, depth: number, limits: WalkLimits, usage: Usage): Promise<boolean> {
  let handle: Dir;
  try {
    handle = await fsp.opendir(dir);
  } catch {
    return true; // gone meanwhile, or not a directory: nothing to count
  }
  try {
    for await (const entry of handle) {
      if (usage.entries >= limits.maxEntries) {
        usage.complete = false;
        return false;
      }
      usage.entries++;
      const path = join(dir, entry.name);
      // the entry's type as readdir reports it, never a link's target
      if (entry.isDirectory()) {
        usage.bytes += BLOCK;
        if (limits.skip?.has(path) || depth >= limits.maxDepth) continue;
        if (!(await walk(path, depth + 1, limits, usage))) return false;
      } else if (entry.isFile()) {
        const st = await fsp.lstat(path).catch(() => null);
        usage.bytes += st?.isFile() ? charged(st.size) : st ? BLOCK : 0;
      } else {
        usage.bytes += BLOCK;
      }
    }
  } catch {
    // the directory went away while it was read: what was counted stands
  } finally {
    // `for await` closes the handle when it ends or breaks; closing it again is harmless
    await handle.close().catch(() => undefined);
  }
  return true;
}

/** Entries of one output's directory (a recording, an HLS run: its tracks, segments, parts) looked at, at most. */
export const OUTPUT_DIR_ENTRIES = 10_000;

/** What one output's directory holds (its files and `.composite/` parts: two levels), looking at `maxEntries` entries at most. */
export function outputDirUsage(dir: string, maxEntries = OUTPUT_DIR_ENTRIES): Promise<Usage> {
  return diskUsage([dir], { maxEntries, maxDepth: 2 });
}

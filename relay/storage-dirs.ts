/** The relay's two storage roots (`--recordings-dir`, `--hls-dir`), checked to be apart at start. */
import { realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';

/** `path` with the links of its deepest existing ancestor resolved (the rest may not exist yet). */
function realish(path: string): string {
  const rest: string[] = [];
  for (let dir = resolve(path); ; ) {
    try {
      return join(realpathSync.native(dir), ...rest.reverse());
    } catch {
      const parent = dirname(dir);
      if (parent === dir) return resolve(path);
      rest.push(basename(dir));
      dir = parent;
    }
  }
}

/**
 * Refuse recordings and HLS in one directory, or one inside the other, compared as real paths
 * (links resolved as far as the directories exist). Nothing there was made to share: a project's
 * disk quota would count runs that are not its own, an HLS run's id could be a project's
 * directory, and the runs would use up a recordings listing's entries. Throws with what to change.
 */
export function checkStorageDirs(config: { recordingsDir: string; hlsDir: string }): void {
  const recordings = realish(config.recordingsDir);
  const hls = realish(config.hlsDir);
  const inside = (dir: string, parent: string) => {
    const path = relative(parent, dir);
    return path === '' || !(path === '..' || path.startsWith(`..${sep}`) || isAbsolute(path));
  };
  if (inside(recordings, hls) || inside(hls, recordings)) {
    throw new Error(`--recordings-dir (${recordings}) and --hls-dir (${hls}) must be apart: neither may be the other or inside it`);
  }
}

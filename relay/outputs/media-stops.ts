/**
 * The media outputs of one relay that have not finished, so that closing the relay waits for
 * them to write their files (a recording's MP4 is put together at its stop) before the last
 * ffmpeg processes are killed. Keyed by the relay's provider settings (one object per relay).
 */

const running = new WeakMap<object, Set<Promise<void>>>();

/** A media output started for `owner`: call the result once it has stopped (however it stopped). */
export function mediaOutputStarted(owner: object): () => void {
  let set = running.get(owner);
  if (!set) running.set(owner, (set = new Set()));
  let done!: () => void;
  const stopped = new Promise<void>((resolve) => (done = resolve));
  set.add(stopped);
  return () => {
    set.delete(stopped);
    done();
  };
}

/** Resolves once every media output of `owner` has stopped, or after `ms` (whichever is first). */
export async function mediaOutputsStopped(owner: object, ms: number): Promise<void> {
  const set = running.get(owner);
  if (!set || set.size === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.allSettled([...set]), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** How many media outputs of `owner` have not finished (for tests and metrics). */
export function mediaOutputsRunning(owner: object): number {
  return running.get(owner)?.size ?? 0;
}

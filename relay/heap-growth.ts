import { setFlagsFromString } from 'node:v8';

/** The `tessera-relay` command's default for `--heap-growth` (percent), also its largest. */
export const DEFAULT_HEAP_GROWTH_PERCENT = 300;

/** The V8 flag it sets. */
export const HEAP_GROWTH_FLAG = '--heap-growing-percent';

/**
 * How far V8's old generation may grow past what the last full collection kept before the next
 * one starts: `percent` over it (300: to four times it, the most V8 itself ever allows). V8 sizes
 * this so that collections take about 3 % of the time, which for the relay's small heap (about
 * 35 MB kept) under the hostile benchmark's `rooms` and `streams` floods meant a full collection
 * every 0.27 s, each with 5–27 ms pauses that every room waits through; with 300, about one a
 * second, then started by the Buffers the floods' reads allocate, not by the heap
 * (`bench/RESULTS.md`, session 12). The cost is garbage up to three times the kept heap. The
 * flag also replaces the smaller factor V8 picks near its heap limit or under memory pressure;
 * V8 still never sets the limit past halfway from the kept heap to `--max-old-space-size`.
 *
 * Process-wide, so the command sets it (`--heap-growth`), not `startRelay`: a process that embeds
 * the relay keeps its own settings; so does one started with `--heap-growing-percent` itself
 * (on the command line or in `NODE_OPTIONS`). 0 leaves V8's own sizing.
 *
 * @returns whether it was set (false: 0, or the operator's own flag is kept)
 */
export function setHeapGrowth(percent: number, execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  if (!Number.isInteger(percent) || percent < 0 || percent > DEFAULT_HEAP_GROWTH_PERCENT) throw new RangeError(`the heap growth is a whole percent from 0 to ${DEFAULT_HEAP_GROWTH_PERCENT}, not ${percent}`);
  const own = (arg: string) => arg.startsWith(HEAP_GROWTH_FLAG) || arg.startsWith('--heap_growing_percent');
  if (percent === 0 || execArgv.some(own) || nodeOptions.split(/\s+/).some(own)) return false;
  setFlagsFromString(`${HEAP_GROWTH_FLAG}=${percent}`);
  return true;
}

import { setFlagsFromString } from 'node:v8';

/** The `tessera-relay` command's default for `--heap-growth` (percent). */
export const DEFAULT_HEAP_GROWTH_PERCENT = 300;

/**
 * How far V8's old generation may grow past what the last full collection kept before the next
 * one starts: `percent` over it (300: to four times it). V8 sizes this itself so that collections
 * take about 3 % of the time, which for the relay's small heap (30–50 MB kept) under a flood meant
 * a full collection every 0.27 s, each with 5–27 ms pauses that every room waits through. With 300
 * one came every 1.2 s (then triggered by the Buffers the floods' reads allocate, not by the heap):
 * fewer pauses for up to three times the live heap in garbage (about 100–150 MB here).
 *
 * Process-wide, so the command sets it (`--heap-growth`), not `startRelay`: a process that embeds
 * the relay keeps its own settings. 0 leaves V8's own heuristic.
 */
export function setHeapGrowth(percent: number): void {
  if (!Number.isInteger(percent) || percent < 0 || percent > 1000) throw new RangeError(`the heap growth is a whole percent from 0 to 1000, not ${percent}`);
  setFlagsFromString(`--heap-growing-percent=${percent}`);
}

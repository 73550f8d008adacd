/** Helpers shared by the benchmarks. */
import { WebSocket as NodeWebSocket } from 'ws';

(globalThis as { WebSocket?: unknown }).WebSocket ??= NodeWebSocket;

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function summary(samples: number[]): { p50: number; p99: number; mean: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean: samples.reduce((a, b) => a + b, 0) / samples.length };
}

export const ms = (n: number) => `${n.toFixed(3)} ms`;
export const ratio = (ours: number, floor: number) => `${(ours / floor).toFixed(2)}×`;

/** A markdown table. */
export function table(head: string[], rows: Array<Array<string | number>>): string {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/**
 * Round trips of `n` pages of 100 viewers walked in order by `observer`, each beside its floor:
 * a page of the stage (a few speakers, the same request and path, a size that does not change
 * with the audience), asked just before it. What the machine's load adds to both cancels out in
 * their ratio; what the audience's size adds to a viewer page does not.
 */
export async function pagesBesideFloor(observer: import('../src/room.ts').Room, n: number): Promise<{ page: number[]; floor: number[] }> {
  const page: number[] = [];
  const floor: number[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < n; i++) {
    let start = performance.now();
    await observer.getParticipants({ tier: 'speaker', limit: 100 });
    floor.push(performance.now() - start);
    start = performance.now();
    const got = await observer.getParticipants({ tier: 'viewer', limit: 100, cursor });
    page.push(performance.now() - start);
    cursor = got.nextCursor;
  }
  return { page, floor };
}

/** Round trips of `n` pages of 100 viewers walked in order by `observer` (ms each). */
export async function pageLatencies(observer: import('../src/room.ts').Room, n: number): Promise<number[]> {
  const out: number[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    const page = await observer.getParticipants({ tier: 'viewer', limit: 100, cursor });
    out.push(performance.now() - start);
    cursor = page.nextCursor;
  }
  return out;
}

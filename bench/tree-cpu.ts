/**
 * CPU time of a process and all its descendants (the relay and the ffmpegs it runs), read from
 * /proc: Linux only, like the rest of the outputs benchmark.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICKS = 100; // USER_HZ on Linux

interface Stat {
  ppid: number;
  /** CPU seconds, user + system. */
  cpu: number;
  comm: string;
}

function stat(pid: number): Stat | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // the command name is in parentheses and may itself contain spaces or parentheses
    const close = text.lastIndexOf(')');
    const comm = text.slice(text.indexOf('(') + 1, close);
    const fields = text.slice(close + 2).split(' ');
    return { ppid: Number(fields[1]), cpu: (Number(fields[11]) + Number(fields[12])) / TICKS, comm };
  } catch {
    return null;
  }
}

/** CPU seconds used so far by each process of the tree under `root`, by pid (with its name). */
export function treeCpu(root: number): Map<number, { cpu: number; comm: string }> {
  const all = new Map<number, Stat>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = stat(Number(name));
    if (s) all.set(Number(name), s);
  }
  const children = new Map<number, number[]>();
  for (const [pid, s] of all) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
  const out = new Map<number, { cpu: number; comm: string }>();
  const walk = (pid: number) => {
    const s = all.get(pid);
    if (!s) return;
    out.set(pid, { cpu: s.cpu, comm: s.comm });
    for (const c of children.get(pid) ?? []) walk(c);
  };
  walk(root);
  return out;
}

/**
 * CPU used by the tree under `root` while `during` runs, in cores (1 = one core busy), split
 * into the root process itself and its descendants (ffmpeg). Processes that ended meanwhile
 * are not counted: measure a steady state.
 */
export async function measureTree(root: number, during: () => Promise<unknown>): Promise<{ root: number; children: number; seconds: number }> {
  const before = treeCpu(root);
  const t0 = performance.now();
  await during();
  const seconds = (performance.now() - t0) / 1000;
  const after = treeCpu(root);
  let own = 0;
  let kids = 0;
  for (const [pid, now] of after) {
    const used = now.cpu - (before.get(pid)?.cpu ?? 0);
    if (pid === root) own += used;
    else kids += used;
  }
  return { root: own / seconds, children: kids / seconds, seconds };
}

/** The heartbeat sweep (issue 11): every connection once per period, never all of them at once. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HeartbeatSweep, type Beating } from './heartbeat.ts';

function members(n: number, log: number[][], tick: () => number): Set<Beating> {
  return new Set(Array.from({ length: n }, (_, i) => ({ heartbeat: () => void (log[tick()] ??= []).push(i) })));
}

describe('HeartbeatSweep', () => {
  it('2,000 connections: each pinged once per period, at most a fiftieth of them at each wake', () => {
    const log: number[][] = [];
    let t = 0;
    const all = members(2000, log, () => t);
    let periods = 0;
    const sweep = new HeartbeatSweep(all, 15_000, () => periods++);
    sweep.stop();
    for (t = 0; t < 100; t++) sweep.tick(); // two periods of fifty wakes
    assert.equal(periods, 2);
    const counts = new Map<number, number>();
    for (const wake of log) for (const i of wake ?? []) counts.set(i, (counts.get(i) ?? 0) + 1);
    assert.equal(counts.size, 2000);
    assert.ok([...counts.values()].every((c) => c === 2), 'each once per period');
    assert.ok(log.every((wake) => (wake?.length ?? 0) <= 40), `the largest wake pinged ${Math.max(...log.map((w) => w?.length ?? 0))}`);
  });

  it('a few connections are still pinged once per period, not once per wake; one gone meanwhile is skipped', () => {
    const log: number[][] = [];
    let t = 0;
    const all = members(3, log, () => t);
    const sweep = new HeartbeatSweep(all, 15_000);
    sweep.stop();
    const [first] = all;
    all.delete(first!);
    for (t = 0; t < 150; t++) sweep.tick(); // three periods
    assert.deepEqual(log.flat().sort(), [1, 1, 1, 2, 2, 2]);
  });

  it('a short period (tests use 100 ms) wakes at most every 20 ms', () => {
    const sweep = new HeartbeatSweep(new Set(), 100);
    sweep.stop();
    assert.equal((sweep as unknown as { slices: number }).slices, 5);
  });

  it('two pings of one connection are a period apart, whoever leaves or joins meanwhile', () => {
    let t = 0;
    const at = new Map<Beating, number[]>();
    const make = (): Beating => {
      const b: Beating = { heartbeat: () => void at.get(b)!.push(t) };
      at.set(b, []);
      return b;
    };
    const all = new Set<Beating>(Array.from({ length: 2000 }, make));
    const sweep = new HeartbeatSweep(all, 15_000);
    sweep.stop();
    for (; t < 50; t++) sweep.tick();
    const survivors = [...all].slice(1990);
    for (const m of [...all]) if (!survivors.includes(m)) all.delete(m);
    for (let i = 0; i < 3000; i++) all.add(make());
    for (; t < 150; t++) sweep.tick();
    for (const m of survivors) {
      const pings = at.get(m)!;
      assert.equal(pings.length, 3);
      for (let i = 1; i < pings.length; i++) assert.equal(pings[i]! - pings[i - 1]!, 50, `pinged at wakes ${pings.join(', ')}`);
    }
  });
});

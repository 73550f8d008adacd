/** The fan-out budget's two measures (issue 11): copies, and the copies past the first. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { COPY_FLOOR_BYTES, FanoutBudget } from './fanout-budget.ts';

const MiB = 1024 * 1024;
const limits = { fanoutByteRate: 32 * MiB, fanoutByteBurst: 64 * MiB, broadcastByteRate: 8 * MiB, broadcastByteBurst: 16 * MiB };

/** Sends of `bytes` to `recipients`, one at each `stepMs` of `ms` that finds credit: how many went. */
function pacedSends(ms: number, stepMs: number, bytes: number, recipients: number): number {
  let clock = 0;
  const budget = new FanoutBudget(limits, () => clock);
  let sends = 0;
  for (clock = 0; clock < ms; clock += stepMs) {
    if (budget.hasCredit()) {
      budget.spend(bytes, recipients);
      sends++;
    }
  }
  return sends;
}

describe('FanoutBudget', () => {
  it('a point-to-point transfer runs at the fan-out rate: its bytes are not broadcast', () => {
    let clock = 0;
    const budget = new FanoutBudget(limits, () => clock);
    let sent = 0;
    // 10 s of 64 KiB chunks to one recipient, each sent as soon as there is credit
    for (clock = 0; clock < 10_000; clock += 1) {
      while (budget.hasCredit()) {
        budget.spend(64 * 1024, 1);
        sent += 64 * 1024;
      }
    }
    const rate = (sent - 64 * MiB) / 10 / MiB;
    assert.ok(rate > 31 && rate < 33.5, `${rate.toFixed(1)} MiB/s past the burst`);
  });

  it('a broadcast is paced by the broadcast rate: a 36 KB stroke to 1,016 members every 4.5 s, not every second', () => {
    const strokes = pacedSends(60_000, 10, 36_000, 1016);
    // 8 MiB/s over 60 s plus the burst, 36.5 MB of copies past the first each
    assert.ok(strokes >= 13 && strokes <= 16, `${strokes} strokes in a minute`);
  });

  it('a chunk nobody receives is still one copy; the wait is the longer of the two debts', () => {
    let clock = 0;
    const budget = new FanoutBudget(limits, () => clock);
    budget.spend(64 * MiB, 0);
    assert.ok(budget.hasCredit(), 'one copy of 64 MiB: the fan-out burst, no broadcast');
    budget.spend(MiB, 0);
    assert.equal(budget.hasCredit(), false);
    assert.ok(Math.abs(budget.msUntilToken(0) - (1000 / 32)) < 1, `${budget.msUntilToken(0)} ms`);
    clock += 1000;
    budget.spend(MiB, 21); // 20 MiB past the first copy: 4 MiB over the broadcast burst
    assert.ok(Math.abs(budget.msUntilToken(0) - 500) < 1, `${budget.msUntilToken(0)} ms: the broadcast debt is the longer`);
  });

  it('each copy counts at least COPY_FLOOR_BYTES: one-byte chunks to a thousand members are paced like 256-byte ones (they made 288,000 frames a second on a ninth of the budget)', () => {
    const chunks = pacedSends(10_000, 1, 1, 1000);
    // 8 MiB/s of copies past the first, 999 × 256 bytes a chunk: 33 a second, plus the burst
    const perSecond = (chunks - (16 * MiB) / (999 * COPY_FLOOR_BYTES)) / 10;
    assert.ok(perSecond > 30 && perSecond < 36, `${perSecond.toFixed(1)} chunks a second`);
  });
});

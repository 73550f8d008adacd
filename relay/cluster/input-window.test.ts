import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { InputWindows, STALE_MS, WINDOW_WAIT_MS } from './input-window.ts';

describe('input windows (members\' chunks in flight to their homes)', () => {
  it('a token waits past its window, a home past its own; what the home takes opens them again', () => {
    let now = 0;
    const w = new InputWindows(100, 250, () => now);
    w.sent('A', 't1', 100);
    assert.equal(w.waitMs('A', 't1'), 0, 'at the window, not past it');
    w.sent('A', 't1', 1);
    assert.equal(w.waitMs('A', 't1'), WINDOW_WAIT_MS);
    assert.equal(w.waitMs('A', 't2'), 0, 'another token is not held back by it');
    assert.equal(w.waitMs('B', 't1'), 0, 'nor the same token to another home');
    w.sent('A', 't2', 100);
    w.sent('A', 't3', 100);
    assert.equal(w.waitMs('A', 't4'), WINDOW_WAIT_MS, 'the home\'s window is full for everyone');
    w.taken('A', 't1', 101);
    assert.equal(w.waitMs('A', 't1'), 0);
    assert.equal(w.waitMs('A', 't4'), 0);
    assert.equal(w.inFlight('A'), 200);
  });

  it('a full window the home has not answered for a while is emptied (its answers were lost); a home that is gone is forgotten', () => {
    let now = 0;
    const w = new InputWindows(100, 1000, () => now);
    w.sent('A', 't1', 500);
    now += STALE_MS - 1;
    assert.equal(w.waitMs('A', 't1'), WINDOW_WAIT_MS);
    now += 2;
    assert.equal(w.waitMs('A', 't1'), 0, 'stale: emptied');
    w.sent('B', 't1', 5000);
    assert.equal(w.waitMs('B', 't1'), WINDOW_WAIT_MS);
    w.forget('B');
    assert.equal(w.waitMs('B', 't1'), 0);
    assert.equal(w.inFlight('B'), 0);
  });
});

/**
 * A rate shared by a crowd of connections (a project's domain-wide tokens), served in turn: a
 * fake clock and Node's mock timers, so nothing here depends on the machine's speed.
 */
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { SharedRate } from './shared-rate.ts';

/** A shared rate of `rate` bytes a second (burst `burst`) on a fake clock that `advance` moves with the timers. */
function harness(t: TestContext, rate: number, burst: number, quantum = 0) {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  let clock = 0;
  const shared = new SharedRate(rate, burst, () => clock, quantum);
  const grants: string[] = [];
  const waiter = (name: string) => ({ granted: (bytes: number) => void grants.push(`${name}:${bytes}`) });
  return {
    shared,
    grants,
    waiter,
    advance(ms: number) {
      for (let i = 0; i < ms; i++) {
        clock += 1;
        t.mock.timers.tick(1);
      }
    },
  };
}

describe('SharedRate: one rate for a crowd, in turn', () => {
  it('serves those waiting in the order they came, each once, as the tokens come; a newcomer does not pass them', (t) => {
    const h = harness(t, 1000, 1000); // 1,000 bytes a second: 100 bytes each 100 ms
    assert.equal(h.shared.take(1000), true, 'the burst is there at first');
    for (const name of ['a', 'b', 'c']) h.shared.wait(h.waiter(name), 100);
    assert.deepEqual(h.grants, []);
    h.advance(100);
    assert.deepEqual(h.grants, ['a:100']);
    // tokens for one frame are there again, but b and c wait: a newcomer does not take them
    h.advance(100);
    assert.equal(h.shared.take(1), false, 'a newcomer waits in line like the rest');
    assert.deepEqual(h.grants, ['a:100', 'b:100']);
    h.advance(100);
    assert.deepEqual(h.grants, ['a:100', 'b:100', 'c:100']);
    assert.equal(h.shared.waiting, 0);
    h.advance(100);
    assert.equal(h.shared.take(100), true, 'with nobody waiting, whoever asks takes at once');
  });

  it('a crowd of a hundred is served round the line, whatever the order its timers would have fired in', (t) => {
    const h = harness(t, 10_000, 10_000);
    h.shared.take(10_000);
    for (let i = 0; i < 100; i++) h.shared.wait(h.waiter(`w${i}`), 1000);
    h.advance(10_000); // 100 frames of 1,000 bytes at 10,000 bytes a second
    assert.deepEqual(
      h.grants,
      Array.from({ length: 100 }, (_, i) => `w${i}:1000`),
    );
  });

  it('a turn lasts up to its quantum while the one served asks again before the next could be served; then the next in line has it', (t) => {
    const h = harness(t, 1000, 1000, 300); // turns of 300 bytes: three frames of 100
    h.shared.take(1000);
    const a = { granted: (bytes: number) => void h.grants.push(`a:${bytes}`) };
    h.shared.wait(a, 100);
    h.shared.wait(h.waiter('b'), 100);
    h.advance(100);
    assert.deepEqual(h.grants, ['a:100'], 'a starts its turn');
    // a asks again at once (its next frame was read with the last): it goes before b
    assert.equal(h.shared.take(100, a), false, 'the tokens are not there yet');
    h.shared.wait(a, 100);
    h.advance(100);
    h.shared.wait(a, 100);
    h.advance(100);
    assert.deepEqual(h.grants, ['a:100', 'a:100', 'a:100'], 'three frames: a whole turn');
    h.shared.wait(a, 100);
    h.advance(100);
    assert.deepEqual(h.grants, ['a:100', 'a:100', 'a:100', 'b:100'], 'its turn is over: b is next, a waits in line behind it');
    // b's turn now, but b does not ask again: the line goes on without it
    h.advance(100);
    assert.deepEqual(h.grants.at(-1), 'a:100');
  });

  it('one that left the line (its connection closed) is passed over, and tokens given back are served to the next', (t) => {
    const h = harness(t, 1000, 1000);
    h.shared.take(1000);
    const a = h.shared.wait(h.waiter('a'), 500);
    h.shared.wait(h.waiter('b'), 500);
    a.cancel();
    h.advance(500);
    assert.deepEqual(h.grants, ['b:500'], 'a is skipped, b gets the first 500 bytes');
    h.shared.wait(h.waiter('c'), 300);
    h.shared.refund(300); // a connection that closed with its bytes taken
    assert.deepEqual(h.grants, ['b:500', 'c:300'], 'the bytes given back are served at once');
  });

  it('a frame larger than the burst passes once the bucket is full and leaves it in debt: no frame waits for ever, and the rate holds on average', (t) => {
    const h = harness(t, 1000, 2000);
    h.shared.take(2000);
    h.shared.wait(h.waiter('big'), 10_000);
    h.shared.wait(h.waiter('small'), 10);
    h.advance(2000);
    assert.deepEqual(h.grants, ['big:10000'], 'the burst is there again: the big frame passes, charged in full');
    h.advance(8000);
    assert.deepEqual(h.grants, ['big:10000'], 'its debt (8,000 bytes at 1,000 a second) is paid first');
    h.advance(20);
    assert.deepEqual(h.grants, ['big:10000', 'small:10']);
  });

  it('the line is one place per key (a token\'s connections), served round the keys: another token waits one turn of a crowd, not a turn of each of its connections', (t) => {
    const h = harness(t, 1000, 1000);
    h.shared.take(1000);
    for (let i = 0; i < 5; i++) h.shared.wait(h.waiter(`crowd${i}`), 100, 'crowd');
    h.shared.wait(h.waiter('member'), 100, 'member');
    h.advance(300);
    assert.deepEqual(h.grants, ['crowd0:100', 'member:100', 'crowd1:100'], 'the member is served after one of the crowd');
    h.advance(300);
    assert.deepEqual(h.grants.slice(3), ['crowd2:100', 'crowd3:100', 'crowd4:100']);
  });

  it('a place given up leaves the line at once, and an empty frame costs a byte (a grant is never of nothing)', (t) => {
    const h = harness(t, 1000, 1000);
    h.shared.take(1000);
    const tickets = Array.from({ length: 1000 }, (_, i) => h.shared.wait(h.waiter(`gone${i}`), 100, `k${i % 3}`));
    assert.equal(h.shared.waiting, 1000);
    for (const ticket of tickets) ticket.cancel();
    assert.equal(h.shared.waiting, 0, 'nothing of the closed connections is left in line');
    h.shared.wait(h.waiter('empty'), 0);
    h.advance(1);
    assert.deepEqual(h.grants, ['empty:1']);
  });
});

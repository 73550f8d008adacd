import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BROADCAST_CHARGED_MEMBERS, BROADCAST_EVENT_BYTES } from '../data/fanout-budget.ts';
import { PresenceBudgets, presenceKey } from './presence.ts';

describe('PresenceBudgets', () => {
  const limits = { presenceByteRate: 1000 * BROADCAST_EVENT_BYTES, presenceByteBurst: 2000 * BROADCAST_EVENT_BYTES };

  it('charges an announcement per recipient; a token in debt may not announce until it is paid back', () => {
    let now = 0;
    const budgets = new PresenceBudgets(limits, () => now);
    const key = presenceKey({ project: 'p', tokenKey: 'sig' });
    assert.equal(budgets.mayAnnounce(key), true, 'a token never seen may');
    budgets.charge(key, [0], 1500);
    assert.equal(budgets.mayAnnounce(key), true, 'within its burst');
    budgets.charge(key, [0], 1500);
    assert.equal(budgets.mayAnnounce(key), false, '1,000 recipients into debt');
    assert.equal(Math.round(budgets.msUntilCredit(key)), 1000);
    assert.equal(budgets.mayAnnounce(presenceKey({ project: 'p', tokenKey: 'other' })), true, 'another token is not');
    assert.equal(budgets.mayAnnounce(presenceKey({ project: 'q', tokenKey: 'sig' })), true, 'nor the same signature in another project');
    now = 1000;
    assert.equal(budgets.mayAnnounce(key), true, 'paid back after a second');
  });

  it('charges each event as many bytes as it was, at least a room-wide event\'s', () => {
    let now = 0;
    const budgets = new PresenceBudgets({ presenceByteRate: 1000, presenceByteBurst: 100_000 }, () => now);
    budgets.charge('k', [2400, 60], 40); // an arrival with a long escaped name and its departure, to 40 members
    assert.equal(budgets.mayAnnounce('k'), false, '(2,400 + 128) × 40 = 101,120 bytes: over the burst by 1,120');
    assert.equal(Math.round(budgets.msUntilCredit('k')), 1120, 'paid back at 1,000 bytes a second');
    now = 1120;
    assert.equal(budgets.mayAnnounce('k'), true);
  });

  it('charges at least one recipient and at most the charged members', () => {
    let now = 0;
    const budgets = new PresenceBudgets({ presenceByteRate: 1024, presenceByteBurst: BROADCAST_CHARGED_MEMBERS * BROADCAST_EVENT_BYTES }, () => now);
    budgets.charge('k', [0], 1_000_000);
    assert.equal(budgets.mayAnnounce('k'), true, 'a room of a million costs what one of 8,192 does: the burst, not more');
    budgets.charge('k', [0], 0);
    assert.equal(budgets.mayAnnounce('k'), false, 'an arrival in an empty room still costs one');
    now += 1000;
    assert.equal(budgets.mayAnnounce('k'), true);
  });

  it('forgets the tokens whose budget is whole again once it remembers thousands', () => {
    let now = 0;
    const budgets = new PresenceBudgets(limits, () => now);
    for (let i = 0; i < 4095; i++) budgets.charge(`t${i}`, [0], 10);
    budgets.charge('in-debt', [0], 5000);
    assert.equal(budgets.size, 4096);
    now = 1000; // the 4,095 are whole again; the one in debt is not
    budgets.charge('new', [0], 1);
    assert.equal(budgets.size, 2, 'only the token in debt and the new one are kept');
    assert.equal(budgets.mayAnnounce('in-debt'), false, 'a debt is never forgotten');
  });

  it('a pass that forgets nothing is not repeated on the next arrival (thousands of tokens in debt cost no quadratic time)', () => {
    const budgets = new PresenceBudgets(limits, () => 0);
    for (let i = 0; i < 4096; i++) budgets.charge(`t${i}`, [0], 3000);
    budgets.charge('a', [0], 3000);
    assert.equal(budgets.size, 4097, 'all in debt: nothing forgotten');
    for (let i = 0; i < 4000; i++) budgets.charge(`u${i}`, [0], 3000);
    assert.equal(budgets.size, 8097, 'no pass until twice what the last one kept');
  });
});

import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { OutputStarts } from './output-starts.ts';

describe('output starts', () => {
  it('a budget per room and output, refilled over a minute', () => {
    let now = 0;
    const starts = new OutputStarts(2, () => now);
    assert.equal(starts.take('p', 'r', 'recording'), true);
    assert.equal(starts.take('p', 'r', 'recording'), true);
    assert.equal(starts.take('p', 'r', 'recording'), false);
    assert.equal(starts.take('p', 'r', 'hls'), true, 'another output of the room');
    assert.equal(starts.take('p', 'r2', 'recording'), true, 'another room');
    assert.equal(starts.take('q', 'r', 'recording'), true, 'another project');
    now += 30_000;
    assert.equal(starts.take('p', 'r', 'recording'), true, 'one back after half a minute');
    assert.equal(starts.take('p', 'r', 'recording'), false);
  });

  it('forgets the budgets that are whole again: what it keeps is bounded by the outputs started within a minute', () => {
    let now = 0;
    const starts = new OutputStarts(20, () => now);
    for (let i = 0; i < 1024; i++) starts.take('p', `r${i}`, 'recording');
    now += 61_000;
    for (let i = 0; i < 10; i++) starts.take('p', `s${i}`, 'recording');
    assert.equal(starts.size, 10);
  });
});

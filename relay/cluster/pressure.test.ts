import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import type { MemberConnection } from '../seam.ts';
import { PressureWatch, REPORT_STEP } from './pressure.ts';

describe('stream pressure at a member\'s node', () => {
  it('a connection filling past the high-water mark is reported, again at each further step (so that the home can drop it from streams before the cut), and when drained', async () => {
    const reports: number[] = [];
    const conn = { bufferedAmount: 0 } as MemberConnection;
    const edge = { conn, home: 'h' };
    const watch = new PressureWatch(1000, (_home, _link, bytes) => reports.push(bytes), () => edge);
    watch.check('l', edge);
    assert.deepEqual(reports, []);
    (conn as { bufferedAmount: number }).bufferedAmount = 2000;
    watch.check('l', edge);
    (conn as { bufferedAmount: number }).bufferedAmount = 2000 + REPORT_STEP - 1;
    watch.check('l', edge);
    assert.deepEqual(reports, [2000], 'not again before a step');
    (conn as { bufferedAmount: number }).bufferedAmount = 2000 + 2 * REPORT_STEP;
    watch.check('l', edge);
    assert.deepEqual(reports, [2000, 2000 + 2 * REPORT_STEP]);
    (conn as { bufferedAmount: number }).bufferedAmount = 0;
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual(reports, [2000, 2000 + 2 * REPORT_STEP, 0], 'drained');
    watch.stop();
  });
});

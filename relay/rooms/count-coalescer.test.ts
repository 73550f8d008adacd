import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ParticipantCounts } from '../../src/protocol/messages.ts';
import { CountCoalescer } from './count-coalescer.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('CountCoalescer', () => {
  it('publishes a burst as one event at the start and the settled value one window later', async () => {
    let counts: ParticipantCounts = { speaker: 0, viewer: 0, total: 0 };
    const sent: ParticipantCounts[] = [];
    const c = new CountCoalescer(100, () => counts, (v) => sent.push(v));
    for (let i = 1; i <= 1000; i++) {
      counts = { speaker: 0, viewer: i, total: i };
      c.changed();
      if (i === 1) await sleep(5);
    }
    assert.equal(sent.length, 1, 'the first change goes out at once');
    await sleep(160);
    assert.equal(sent.length, 2);
    assert.deepEqual(sent.at(-1), { speaker: 0, viewer: 1000, total: 1000 });
    c.dispose();
  });

  it('publishes nothing when the value returns to what was last sent', async () => {
    let counts: ParticipantCounts = { speaker: 1, viewer: 0, total: 1 };
    const sent: ParticipantCounts[] = [];
    const c = new CountCoalescer(30, () => counts, (v) => sent.push(v));
    counts = { speaker: 1, viewer: 1, total: 2 };
    c.changed();
    counts = { speaker: 1, viewer: 0, total: 1 };
    await sleep(60);
    assert.equal(sent.length, 0);
    c.dispose();
  });

  it('never publishes after dispose', async () => {
    let counts: ParticipantCounts = { speaker: 0, viewer: 0, total: 0 };
    const sent: ParticipantCounts[] = [];
    const c = new CountCoalescer(10, () => counts, (v) => sent.push(v));
    c.dispose();
    counts = { speaker: 1, viewer: 0, total: 1 };
    c.changed();
    await sleep(30);
    assert.equal(sent.length, 0);
  });
});

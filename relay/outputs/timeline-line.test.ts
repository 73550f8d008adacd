import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RawPayload } from '../data/raw-json.ts';
import type { TimedEvent } from '../rooms/timeline.ts';
import { timelineLine } from './recording.ts';

describe('the recording\'s timeline lines', () => {
  it('a payload that came as its bytes is written as them, line breaks as spaces: one line that reads back as the value', () => {
    const bytes = Buffer.from('{\n  "a": [1, 2,\r\n 3], "s": "x\\ny \u00e9"\n}');
    const line = timelineLine({ type: 'message', topic: 't', from: 'p', payload: new RawPayload(bytes), id: 'm1', at: 5 });
    assert.equal(line.indexOf('\n'), line.length - 1, 'one line');
    assert.deepEqual(JSON.parse(line), { type: 'message', topic: 't', from: 'p', id: 'm1', at: 5, payload: { a: [1, 2, 3], s: 'x\ny \u00e9' } });
    const value: TimedEvent = { type: 'message', topic: 't', from: 'p', payload: { b: 1 }, id: 'm2', at: 6 };
    assert.equal(timelineLine(value), `${JSON.stringify(value)}\n`);
  });
});

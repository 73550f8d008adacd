import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { eventFrame, eventFrameOfJson, messageJson } from './raw-json.ts';
import type { JsonValue, PubSubMessage } from '../../src/protocol/messages.ts';

describe('raw JSON of the relay', () => {
  it('a pubsub message built around its payload\'s JSON is exactly JSON.stringify of the message', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), fc.jsonValue(), fc.integer({ min: 0, max: 2 ** 52 }), (id, topic, from, payload, timestamp) => {
        const message: PubSubMessage = { id, topic, payload: payload as JsonValue, from, timestamp };
        const text = messageJson(message, JSON.stringify(payload));
        assert.equal(text, JSON.stringify(message));
        assert.deepEqual(eventFrameOfJson('pubsub.message', text).frame, eventFrame('pubsub.message', message).frame);
      }),
      { numRuns: 500 },
    );
  });
});

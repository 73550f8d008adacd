import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { eventFrame, eventFrameOfJson, messageJsonParts } from './raw-json.ts';
import type { JsonValue, PubSubMessage } from '../../src/protocol/messages.ts';

describe('raw JSON of the relay', () => {
  it('a pubsub message built around its payload\'s JSON is exactly JSON.stringify of the message', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), fc.jsonValue(), fc.integer({ min: 0, max: 2 ** 52 }), (id, topic, from, payload, timestamp) => {
        const message: PubSubMessage = { id, topic, payload: payload as JsonValue, from, timestamp };
        const parts = messageJsonParts(message, JSON.stringify(payload));
        assert.equal(parts.join(''), JSON.stringify(message));
        const { frame, json } = eventFrameOfJson('pubsub.message', parts);
        assert.deepEqual(frame, eventFrame('pubsub.message', message).frame);
        assert.equal(json.toString(), JSON.stringify(message), 'the message\'s bytes inside the frame');
        assert.deepEqual(JSON.parse(frame.toString()), { type: 'event', name: 'pubsub.message', data: JSON.parse(JSON.stringify(message)) });
      }),
      { numRuns: 500 },
    );
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { eventFrame, eventFrameOfJson, messageJsonParts, RawPayload, rawPayloadOf, requestFromBus, withoutPayload, withPayload } from './raw-json.ts';
import type { JsonValue, PubSubMessage, RequestFrame } from '../../src/protocol/messages.ts';

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

  it('a publish whose payload travels apart from its request (to the room\'s node) goes without a payload key and gets it back as bytes; without them it is refused, not published', () => {
    const publish = { type: 'request', id: 4, method: 'pubsub.publish', params: { topic: 't', payload: 0 } } as RequestFrame;
    const raw = new RawPayload(Buffer.from('{"a":[1,2]}'));
    const sent = withPayload(publish, raw);
    assert.equal(rawPayloadOf(sent), raw);
    const bare = JSON.parse(JSON.stringify(withoutPayload(sent))) as unknown;
    // no key at all: a node of an older version reads the payload from the request, and must fail
    // the publish (it counts the bytes of nothing, and throws), not publish a null in its place
    assert.equal(Object.hasOwn((bare as { params: object }).params, 'payload'), false);
    assert.deepEqual(bare, { type: 'request', id: 4, method: 'pubsub.publish', params: { topic: 't' } });
    const back = requestFromBus(bare, true, Buffer.from('{"a":[1,2]}'));
    assert.ok(back);
    assert.deepEqual(rawPayloadOf(back)?.value, { a: [1, 2] });
    assert.equal(requestFromBus(bare, true, null), null, 'marked raw, its bytes missing');
    assert.equal(requestFromBus('not a request', true, Buffer.from('1')), null);
    assert.deepEqual(requestFromBus(bare, undefined, null), bare, 'not marked: as it came');
    const list = { type: 'request', id: 5, method: 'participants.list', params: { tier: 'viewer' } } as RequestFrame;
    assert.equal(withPayload(list, raw), list, 'another method is left as it is');
    assert.equal(withoutPayload(list), list);
    assert.equal(rawPayloadOf(list), null);
  });
});

/** Generated frames for the protocol fuzzer: random, truncated, wrong-typed, oversized, binary, out of order. */
import fc from 'fast-check';
import { CHUNK_HEADER_BYTES } from '../../src/protocol/messages.ts';

const METHODS = [
  'participants.list', 'room.end', 'participant.remove', 'session.leave', 'pubsub.publish', 'pubsub.subscribe', 'pubsub.unsubscribe',
  'pubsub.history', 'stream.open', 'stream.close', 'lobby.admit', 'lobby.deny', 'participant.request-unpublish', 'output.start',
  'output.stop', 'whiteboard.draw', 'whiteboard.clear', 'whiteboard.shapes', 'media.publish', 'media.unpublish', 'media.mute',
  'media.subscribe', 'media.answer', 'media.layer', 'media.unsubscribe', 'media.force-unpublish', 'no.such.method',
];

/**
 * Strings of one short unit of separators repeated, then a character that fails the match, after
 * a plausible start: what makes a pattern that can match a string in several ways backtrack
 * (`a/b` + `"; "` × 100 + `é` held the relay for good as a stream's mimeType).
 */
const repetitive = fc
  .tuple(
    fc.constantFrom('', 'a/b', 'text/plain', 'v=0', 'a=candidate:1 1 udp 1 ', 'ws://h', '::'),
    fc.string({ unit: fc.constantFrom(';', ' ', ':', '/', '.', '0', ',', '=', '\t', '-', '"', '\\', 'a'), minLength: 1, maxLength: 4 }),
    fc.nat(120),
    fc.constantFrom('\u00e9', '\u0000', 'x', '', '\n'),
  )
  .map(([start, unit, n, tail]) => `${start}${unit.repeat(n)}${tail}`);

/** Plausible values for the parameter names the protocol uses, and implausible ones. */
const value = fc.oneof(
  repetitive,
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom('viewer', 'speaker', 'camera', 'microphone', 'screen', 'recording', 'whiteboard', 'bytes', 'text', 'v=0\r\n', 'rtmp://127.0.0.1:1/a/b'),
  fc.integer({ min: -2, max: 2 ** 33 }),
  fc.constantFrom(null, true, [], {}, -1, 0, 1e308, '', 'x'.repeat(2000)),
);
const params = fc.dictionary(
  fc.constantFrom('tier', 'limit', 'cursor', 'participantId', 'participantIds', 'topic', 'payload', 'to', 'persist', 'size', 'kind', 'streamId', 'output', 'options', 'shape', 'source', 'sdp', 'muted', 'subscriptionId', 'mimeType', 'name', 'streamIds', '__proto__', 'constructor'),
  value,
  { maxKeys: 6 },
);

const request = fc.record({ type: fc.constant('request'), id: fc.oneof(fc.nat(), fc.constantFrom(-1, 1.5, '7', null)), method: fc.constantFrom(...METHODS), params: fc.oneof(params, value) });
const join = fc.record({ type: fc.constant('join'), v: fc.oneof(fc.constant(1), fc.integer()), token: fc.oneof(fc.string(), fc.constant('a.b.c')), participantId: fc.oneof(fc.string(), value), roomId: fc.oneof(fc.string(), value) });
const other = fc.record({ type: fc.oneof(fc.string(), value) }, { requiredKeys: [] });

/** One frame as sent: text (JSON, broken JSON, noise) or binary (chunk-shaped or noise). */
export const frame: fc.Arbitrary<string | Uint8Array> = fc.oneof(
  { weight: 5, arbitrary: request.map((f) => JSON.stringify(f)) },
  { weight: 1, arbitrary: join.map((f) => JSON.stringify(f)) },
  { weight: 1, arbitrary: other.map((f) => JSON.stringify(f)) },
  { weight: 1, arbitrary: fc.tuple(request, fc.nat()).map(([f, cut]) => { const s = JSON.stringify(f); return s.slice(0, cut % Math.max(1, s.length)); }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(20), fc.nat(5), fc.uint8Array({ maxLength: 100 })).map(([id, seq, body]) => { const b = new Uint8Array(CHUNK_HEADER_BYTES + body.length); const v = new DataView(b.buffer); v.setUint8(0, 1); v.setUint32(1, id); v.setUint32(5, seq); b.set(body, CHUNK_HEADER_BYTES); return b; }) },
);

/** Rarely, something far too large. */
export const oversized = fc.constantFrom('x'.repeat(300 * 1024), new Uint8Array(300 * 1024));

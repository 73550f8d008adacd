import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Method, Params, Result } from './messages.ts';
import { parseResult } from './validate-results.ts';

type Sample<M extends Method> = { params: Params<M>; result: Result<M>; malformed: unknown };

/** A call of every method with a valid and a malformed result (typed: a method missing here fails the typecheck). */
const SAMPLES: { [M in Method]: Sample<M> } = {
  'lobby.admit': {
    params: { participantIds: ['w', 'x'] },
    result: { decisions: [{ participantId: 'w', ok: true }, { participantId: 'x', ok: false, error: { code: 'NOT_FOUND', kind: 'Request', message: 'gone', reason: 'not-waiting' } }] },
    malformed: { decisions: [{ participantId: 'x', ok: false }] },
  },
  'lobby.deny': { params: { participantIds: ['w'] }, result: { decisions: [] }, malformed: { decisions: {} } },
  'participant.request-unpublish': { params: { participantId: 'b', source: 'camera' }, result: {}, malformed: null },
  'output.start': {
    params: { output: 'livestream', options: { url: 'rtmp://x/app/key' } },
    result: { state: 'starting', by: 'a', info: { server: 'rtmp://x/app', key: 'ke…' } },
    malformed: { state: 'active', by: 5 },
  },
  'output.stop': { params: { output: 'hls' }, result: { state: 'stopping' }, malformed: { state: ['stopped'] } },
  'whiteboard.draw': {
    params: { shape: { kind: 'text', x: 1, y: 2, text: 'hi' } },
    result: { shape: { kind: 'text', x: 1, y: 2, text: 'hi', id: 's1', by: 'a' } },
    malformed: { shape: { kind: 'text', x: 1, y: 2, text: 'hi' } },
  },
  'whiteboard.clear': { params: {}, result: {}, malformed: [] },
  'whiteboard.shapes': {
    params: {},
    result: { shapes: [{ kind: 'rect', x: 1, y: 2, w: 3, h: 4, id: 's1', by: 'a', width: 2 }] },
    malformed: { shapes: [{ kind: 'rect', x: 1, y: 2, w: 3, h: '4', id: 's1', by: 'a' }] },
  },
  'media.publish': { params: { source: 'camera', kind: 'video', sdp: 'v=0' }, result: { sdp: 'v=0' }, malformed: { sdp: null } },
  'media.unpublish': { params: { source: 'camera' }, result: {}, malformed: 'ok' },
  'media.mute': { params: { source: 'camera', muted: true }, result: {}, malformed: 1 },
  'media.subscribe': { params: { participantId: 'b', source: 'camera' }, result: { subscriptionId: 's', sdp: 'v=0' }, malformed: { subscriptionId: 's' } },
  'media.layer': { params: { subscriptionId: 's', size: { maxWidth: 1, maxHeight: 1 } }, result: { layer: 'h' }, malformed: { layer: 1 } },
  'media.answer': { params: { subscriptionId: 's', sdp: 'v=0' }, result: {}, malformed: true },
  'media.unsubscribe': { params: { subscriptionId: 's' }, result: {}, malformed: null },
  'media.force-unpublish': { params: { participantId: 'b', source: 'screen' }, result: {}, malformed: null },
  'participants.list': {
    params: { tier: 'viewer', limit: 2 },
    result: { participants: [{ id: 'v', name: 'V', joinedAt: 1, tier: 'viewer' }], nextCursor: 'c' },
    malformed: { participants: [{ id: 'v', name: 'V', joinedAt: 1 }], nextCursor: null },
  },
  'room.end': { params: {}, result: {}, malformed: null },
  'participant.remove': { params: { participantId: 'b' }, result: {}, malformed: null },
  'session.leave': { params: {}, result: {}, malformed: null },
  'pubsub.publish': { params: { topic: 't', payload: 1 }, result: { id: 'm', timestamp: 1, recipients: 0 }, malformed: { id: 'm', timestamp: 1 } },
  'pubsub.subscribe': { params: { topic: 't' }, result: {}, malformed: null },
  'pubsub.unsubscribe': { params: { topic: 't' }, result: {}, malformed: null },
  'pubsub.history': {
    params: { topic: 't' },
    result: { messages: [{ id: 'm', topic: 't', payload: { a: [1] }, from: 'b', timestamp: 1 }] },
    malformed: { messages: [{ id: 'm', topic: 't', from: 'b', timestamp: 1 }] },
  },
  'stream.open': { params: { size: 1, kind: 'bytes' }, result: { streamId: 1, chunkBytes: 65536, window: 8 }, malformed: { streamId: 1, chunkBytes: 65536 } },
  'stream.close': { params: { streamId: 1 }, result: {}, malformed: null },
  'stream.leave': { params: { streamId: 1 }, result: {}, malformed: null },
};

const each = (fn: <M extends Method>(method: M, sample: Sample<M>) => void) => {
  for (const method of Object.keys(SAMPLES) as Method[]) fn(method, SAMPLES[method] as Sample<typeof method>);
};

describe('parseResult', () => {
  it('accepts a valid result of every method and refuses a malformed one', () => {
    each((method, { params, result, malformed }) => {
      const parsed = parseResult(method, result, params);
      assert.ok(parsed.ok, `${method}: ${parsed.ok ? '' : parsed.problem}`);
      assert.deepEqual(parsed.value, result, method);
      assert.equal(parseResult(method, malformed, params).ok, false, `${method} malformed`);
      assert.equal(parseResult(method, undefined, params).ok, false, `${method} undefined`);
    });
  });

  it('stream.open: a window of at most 256 chunks of at most 1 MiB (a hostile relay\'s window of 2^53 had the whole source read into the socket)', () => {
    const open = (chunkBytes: number, window: number) => parseResult('stream.open', { streamId: 1, chunkBytes, window }, { size: 1, kind: 'bytes' }).ok;
    assert.equal(open(65536, 16), true);
    assert.equal(open(1024 * 1024, 256), true);
    assert.equal(open(65536, Number.MAX_SAFE_INTEGER), false);
    assert.equal(open(65536, 257), false);
    assert.equal(open(1024 * 1024 + 1, 16), false);
  });

  it('ignores unknown fields of a result', () => {
    assert.deepEqual(parseResult('media.layer', { layer: 'h', future: 1 }, { subscriptionId: 's', size: { maxWidth: 1, maxHeight: 1 } }), { ok: true, value: { layer: 'h' } });
    assert.deepEqual(parseResult('room.end', { future: 1 }, {}), { ok: true, value: {} });
  });

  it('checks a page of 1000 participants in one pass and names the first misfit', () => {
    const participants = Array.from({ length: 1000 }, (_, i) => ({ id: `v${i}`, name: `V${i}`, joinedAt: i, tier: 'viewer' }));
    const good = parseResult('participants.list', { participants, nextCursor: null }, { tier: 'viewer' });
    assert.ok(good.ok);
    assert.equal(good.value.participants, participants, 'checked in place, not copied');
    (participants[999] as Record<string, unknown>).tier = 'everyone';
    const bad = parseResult('participants.list', { participants, nextCursor: null }, { tier: 'viewer' });
    assert.ok(!bad.ok && /participants\[999\]/.test(bad.problem));
    assert.equal(parseResult('participants.list', { participants: [], nextCursor: 5 }, { tier: 'viewer' }).ok, false);
  });

  it("an output's info that does not fit is left out of an answer; a state this SDK does not know is taken as stopped", () => {
    // an older relay's whiteboard (maxBytes a string), an HLS info in a livestream's answer
    assert.deepEqual(parseResult('output.start', { state: 'active', by: 'a', info: { maxBytes: '65536' } }, { output: 'whiteboard' }), { ok: true, value: { state: 'active', by: 'a' } });
    assert.deepEqual(parseResult('output.start', { state: 'active', info: { playlist: '/p.m3u8' } }, { output: 'livestream', options: { url: 'rtmp://x/a/k' } }), { ok: true, value: { state: 'active' } });
    assert.deepEqual(parseResult('output.stop', { state: 'stopping', info: null }, { output: 'hls' }), { ok: true, value: { state: 'stopping' } });
    assert.deepEqual(parseResult('output.stop', { state: 'draining' }, { output: 'hls' }), { ok: true, value: { state: 'stopped' } });
    assert.deepEqual(parseResult('output.start', { state: 'failed', error: { code: 'INTERNAL_ERROR', message: 'x', reason: 'new-reason' } }, { output: 'hls' }), {
      ok: true,
      value: { state: 'failed', error: { code: 'INTERNAL_ERROR', kind: 'Network', message: 'x' } },
    });
  });

  it("a lobby decision's error is normalised; admissions are not copied", () => {
    const admitted = { participantId: 'w', ok: true };
    const result = { decisions: [admitted, { participantId: 'x', ok: false, error: { code: 'NOT_WAITING_ANYMORE', kind: 'Lobby', message: 'gone', reason: 'vanished' } }, { participantId: 'y', ok: false, error: { code: 'INVALID_STATE', message: 'm' } }] };
    const parsed = parseResult('lobby.admit', result, { participantIds: ['w', 'x', 'y'] });
    assert.ok(parsed.ok);
    assert.deepEqual(parsed.value.decisions, [
      admitted,
      { participantId: 'x', ok: false, error: { code: 'NOT_WAITING_ANYMORE', kind: 'Lobby', message: 'gone' } },
      { participantId: 'y', ok: false, error: { code: 'INVALID_STATE', kind: 'State', message: 'm' } },
    ]);
    assert.equal(parsed.value.decisions[0], admitted);
    const all = { decisions: [admitted] };
    const same = parseResult('lobby.deny', all, { participantIds: ['w'] });
    assert.ok(same.ok && same.value.decisions === all.decisions, 'no copy when nothing needs normalising');
  });

  it('a page of participants: a track this SDK does not know is left out, the page copied only then', () => {
    const participants = [
      { id: 'v', name: 'V', joinedAt: 1, tier: 'speaker', tracks: [{ source: 'hologram', kind: 'video', muted: false }, { source: 'camera', kind: 'video', muted: false }] },
      { id: 'w', name: 'W', joinedAt: 2, tier: 'viewer' },
    ];
    const parsed = parseResult('participants.list', { participants, nextCursor: null }, { tier: 'speaker' });
    assert.ok(parsed.ok);
    assert.deepEqual(parsed.value.participants[0]?.tracks, [{ source: 'camera', kind: 'video', muted: false }]);
    assert.equal(parsed.value.participants[1], participants[1]);
    assert.equal(participants[0]!.tracks!.length, 2, 'the input is left alone');
  });

  it('never throws on any JSON value as the result of any method', () => {
    const methods = fc.constantFrom(...(Object.keys(SAMPLES) as Method[]));
    fc.assert(
      fc.property(methods, fc.jsonValue(), (method, value) => typeof parseResult(method, value, SAMPLES[method].params as never).ok === 'boolean'),
      { numRuns: 3000 },
    );
  });
});

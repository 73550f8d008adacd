import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { ServerEventName, ServerEvents } from './messages.ts';
import { parseJoinedFrame, parseServerFrame, parseServerValue } from './validate-server.ts';
import { isServerEventName, parseEventFrame } from './validate-server-events.ts';

/** A `joined` frame as a real relay sent it (captured from `startTestRelay`), for a moderator. */
const JOINED = {
  type: 'joined',
  v: 1,
  roomId: 'r',
  self: {
    id: 'a',
    name: 'a',
    isViewer: false,
    grant: {
      canPublish: true, canSubscribe: true, canPublishData: true, canSubscribeData: true, canRecord: false, canHls: false,
      canLivestream: false, canTranscribe: false, canWhiteboard: false, canModerate: true, canPublishSources: ['camera', 'microphone', 'screen'],
    },
    joinedAt: 1795456746738,
  },
  participants: [{ id: 'b', name: 'Bob', joinedAt: 1795456746000, tracks: [{ source: 'camera', kind: 'video', muted: false }] }],
  counts: { speaker: 2, viewer: 0, total: 2 },
  outputs: {
    recording: { state: 'stopped' },
    hls: { state: 'active', by: 'a', info: { playlist: '/hls/r/index.m3u8' } },
    livestream: { state: 'stopped' },
    transcription: { state: 'failed', error: { code: 'INTERNAL_ERROR', kind: 'Network', message: 'boom', reason: 'provider-failed' } },
    whiteboard: { state: 'stopped' },
  },
  lobby: [{ participantId: 'w', name: 'W', requestedAt: 1 }],
  resume: { credential: 'Qm4q7XAKOQ1EOQG-I-8Hqht0HFXJj9r-', graceMs: 15000 },
  limits: { maxFrameBytes: 262144, maxPayloadBytes: 65536 },
};

const clone = <T>(v: T): T => structuredClone(v);
const text = (v: unknown) => JSON.stringify(v);

/** A valid sample of the data of every event (typed: an event missing here fails the typecheck). */
const EVENT_SAMPLES: { [E in ServerEventName]: ServerEvents[E] } = {
  'participant-joined': { id: 'b', name: 'Bob', joinedAt: 1 },
  'participant-left': { id: 'b' },
  'participant-count-changed': { speaker: 1, viewer: 2, total: 3 },
  'pubsub.message': { id: 'm1', topic: 't', payload: null, from: 'b', timestamp: 1 },
  'stream.open': { streamId: 1, from: 'b', timestamp: 1, size: 10, kind: 'bytes', topic: 't' },
  'stream.end': { streamId: 1 },
  'stream.abort': { streamId: 1, error: { code: 'CONNECTION_LOST', kind: 'Network', message: 'gone', reason: 'sender-left' } },
  'stream.ack': { streamId: 1, seq: 4 },
  'lobby-request': { participantId: 'w', name: 'W', requestedAt: 1 },
  'lobby-resolved': { participantId: 'w', outcome: 'admitted', by: 'a' },
  'unpublish-requested': { source: 'camera', by: 'a' },
  'output-changed': { output: 'recording', state: 'active', by: 'a', info: { recording: 'rec1', file: 'rec1.json', url: '/recordings/rec1' } },
  'whiteboard-shape': { kind: 'stroke', points: [1, 2, 3, 4], color: '#fff', id: 's1', by: 'a' },
  'whiteboard-cleared': { by: 'a' },
  'track-published': { participantId: 'b', source: 'microphone', kind: 'audio', muted: true },
  'track-unpublished': { participantId: 'b', source: 'screen' },
  'track-mute': { participantId: 'b', source: 'camera', muted: false },
  'subscription-ended': { subscriptionId: 's' },
  'force-unpublished': { source: 'camera', by: 'a' },
};

/** A malformed variant of the data of every event. */
const EVENT_MALFORMED: { [E in ServerEventName]: unknown } = {
  'participant-joined': { id: 'b', name: 'Bob', joinedAt: '1' },
  'participant-left': { id: 5 },
  'participant-count-changed': { speaker: 1, viewer: 2 },
  'pubsub.message': { id: 'm1', topic: 't', from: 'b', timestamp: 1 },
  'stream.open': { streamId: 1, from: 'b', timestamp: 1, size: 10, kind: 'video' },
  'stream.end': {},
  'stream.abort': { streamId: 1, error: { code: 'X' } },
  'stream.ack': { streamId: 1, seq: '4' },
  'lobby-request': { participantId: 'w', requestedAt: 1 },
  'lobby-resolved': { participantId: 'w', outcome: 'maybe' },
  'unpublish-requested': { source: 'webcam', by: 'a' },
  'output-changed': { output: 'recording', state: 'active', info: { playlist: 'x' } },
  'whiteboard-shape': { kind: 'rect', x: 1, y: 2, w: 3, id: 's1', by: 'a' },
  'whiteboard-cleared': null,
  'track-published': { participantId: 'b', source: 'microphone', kind: 'audio' },
  'track-unpublished': { participantId: 'b' },
  'track-mute': { participantId: 'b', source: 'camera', muted: 'no' },
  'subscription-ended': [],
  'force-unpublished': { source: 'camera' },
};

describe('parseServerFrame', () => {
  it('accepts a joined frame as a real relay sends it, dropping fields it does not know', () => {
    const parsed = parseServerFrame(text({ ...JOINED, future: { x: 1 } }));
    assert.ok(parsed.ok);
    assert.deepEqual(parsed.value, JOINED);
    // a viewer's joined, with no lobby and a resume
    const viewer = { ...clone(JOINED), resumed: true, participants: [] } as Record<string, unknown>;
    delete viewer.lobby;
    assert.deepEqual(parseJoinedFrame(viewer), { ok: true, value: viewer });
  });

  it('refuses a malformed joined frame, saying what is wrong', () => {
    const cases: Array<[(j: typeof JOINED & Record<string, unknown>) => void, RegExp]> = [
      [(j) => delete (j as Record<string, unknown>).self, /self/],
      [(j) => ((j.self.grant as Record<string, unknown>).canModerate = 'yes'), /grant/],
      [(j) => (j.self.grant.canPublishSources = ['camera', 'webcam']), /grant/],
      [(j) => (j.participants = [j.participants[0]!, { id: 'x' } as never]), /participants\[1\]/],
      [(j) => ((j.participants[0]!.tracks[0] as Record<string, unknown>).muted = 0), /participants\[0\]/],
      [(j) => ((j.counts as Record<string, unknown>).total = null), /counts/],
      [(j) => delete (j.outputs as Record<string, unknown>).whiteboard, /whiteboard/],
      [(j) => ((j.outputs.hls.info as Record<string, unknown>).playlist = 1), /hls/],
      [(j) => ((j.outputs.transcription.error as Record<string, unknown>).message = undefined), /transcription/],
      [(j) => (j.lobby = {} as never), /lobby/],
      [(j) => delete (j as Record<string, unknown>).resume, /resume/],
      [(j) => ((j.limits as Record<string, unknown>).maxFrameBytes = '1'), /limits/],
      [(j) => (j.roomId = 7 as never), /roomId/],
      [(j) => (j.resumed = 'true'), /resumed/],
    ];
    for (const [spoil, problem] of cases) {
      const joined = clone(JOINED) as typeof JOINED & Record<string, unknown>;
      spoil(joined);
      const parsed = parseServerFrame(text(joined));
      assert.ok(!parsed.ok, String(spoil));
      assert.match(parsed.problem, problem);
    }
  });

  it('parses every other frame type, keeping codes, reasons and kinds this SDK does not know', () => {
    assert.deepEqual(parseServerFrame('{"type":"pong","x":1}'), { ok: true, value: { type: 'pong' } });
    assert.deepEqual(parseServerFrame('{"type":"lobby","requestedAt":5,"ttl":60}'), { ok: true, value: { type: 'lobby', requestedAt: 5, ttl: 60 } });
    assert.equal(parseServerFrame('{"type":"lobby","requestedAt":5}').ok, false);
    const future = { code: 'SHINY_NEW_CODE', message: 'm', reason: 'new-reason', kind: 'NewKind' };
    assert.deepEqual(parseServerFrame(text({ type: 'join-error', error: future })), { ok: true, value: { type: 'join-error', error: future } });
    assert.deepEqual(parseServerFrame(text({ type: 'error', error: { code: 'RATE_LIMITED', message: 'slow', extra: 1 } })), {
      ok: true,
      value: { type: 'error', error: { code: 'RATE_LIMITED', message: 'slow' } },
    });
    for (const error of [null, 'boom', { code: 1, message: 'm' }, { code: 'X' }, { code: 'X', message: 'm', reason: 3 }, { code: 'X', message: 'm', kind: false }]) {
      assert.equal(parseServerFrame(text({ type: 'error', error })).ok, false, text(error));
      assert.equal(parseServerFrame(text({ type: 'join-error', error })).ok, false, text(error));
    }
  });

  it('keeps the id of a malformed response, so that its request can fail', () => {
    assert.deepEqual(parseServerFrame('{"type":"response","id":3,"result":{"a":1}}'), { ok: true, value: { type: 'response', id: 3, result: { a: 1 } } });
    assert.deepEqual(parseServerFrame('{"type":"response","id":3,"error":{"code":"NOT_FOUND","message":"m"}}'), {
      ok: true,
      value: { type: 'response', id: 3, error: { code: 'NOT_FOUND', message: 'm' } },
    });
    const noResult = parseServerFrame('{"type":"response","id":4}');
    assert.ok(!noResult.ok && noResult.id === 4);
    const badError = parseServerFrame('{"type":"response","id":5,"error":{"message":"m"}}');
    assert.ok(!badError.ok && badError.id === 5);
    for (const id of ['1', 1.5, null, -0.5]) {
      const parsed = parseServerFrame(text({ type: 'response', id, result: {} }));
      assert.ok(!parsed.ok && parsed.id === undefined, text(id));
    }
  });

  it('refuses what is not a frame: invalid JSON, non-objects, unknown or missing types', () => {
    for (const t of ['', 'nope', '{', '[]', 'null', '42', '"joined"', '{}', '{"type":"hello"}', '{"type":7}', '{"type":{"toString":1}}', '{"type":"__proto__"}', '{"type":"toString"}']) {
      const parsed = parseServerFrame(t);
      assert.equal(parsed.ok, false, t);
    }
    const unknown = parseServerFrame('{"type":"hello"}');
    assert.ok(!unknown.ok && /unknown frame type "hello"/.test(unknown.problem));
  });
});

describe('event data', () => {
  it('accepts a sample of every event and refuses a malformed one', () => {
    for (const name of Object.keys(EVENT_SAMPLES) as ServerEventName[]) {
      assert.ok(isServerEventName(name));
      const parsed = parseEventFrame({ type: 'event', name, data: { ...EVENT_SAMPLES[name], unknownField: 1 } });
      assert.ok(parsed.ok, `${name}: ${parsed.ok ? '' : parsed.problem}`);
      assert.equal(parsed.value?.name, name);
      const spoilt = parseEventFrame({ type: 'event', name, data: EVENT_MALFORMED[name] });
      assert.ok(!spoilt.ok, `${name} malformed`);
      assert.match(spoilt.problem, new RegExp(`^event ${name.replace('.', '\\.')}: `));
      assert.equal(parseEventFrame({ type: 'event', name }).ok, false, `${name} without data`);
    }
  });

  it('copies small payloads field by field, dropping unknown fields', () => {
    const parsed = parseEventFrame({ type: 'event', name: 'track-mute', data: { participantId: 'b', source: 'camera', muted: true, extra: [1] } });
    assert.deepEqual(parsed, { ok: true, value: { type: 'event', name: 'track-mute', data: { participantId: 'b', source: 'camera', muted: true } } });
  });

  it('ignores an event this SDK does not know, refuses one without a name', () => {
    assert.deepEqual(parseServerFrame('{"type":"event","name":"reaction","data":{"emoji":"x"}}'), { ok: true, value: null });
    assert.deepEqual(parseServerFrame('{"type":"event","name":"toString","data":{}}'), { ok: true, value: null });
    assert.equal(parseServerFrame('{"type":"event","data":{}}').ok, false);
    assert.equal(parseServerFrame('{"type":"event","name":5,"data":{}}').ok, false);
  });

  it('output-changed: info checked per output; an output this SDK does not know passes (the room ignores it)', () => {
    const change = (data: unknown) => parseEventFrame({ type: 'event', name: 'output-changed', data });
    assert.ok(change({ output: 'hls', state: 'active', info: { playlist: '/p.m3u8' } }).ok);
    assert.equal(change({ output: 'hls', state: 'active', info: { maxBytes: 5 } }).ok, false);
    assert.equal(change({ output: 'hls', state: 'paused' }).ok, false);
    assert.ok(change({ output: 'hologram', state: 'active', info: { anything: 1 } }).ok);
    assert.equal(change({ output: 7, state: 'active' }).ok, false);
    assert.equal(change({ output: 'whiteboard', state: 'failed', error: { code: 'INTERNAL_ERROR' } }).ok, false);
  });

  it('whiteboard shapes of every kind', () => {
    const shape = (s: Record<string, unknown>) => parseEventFrame({ type: 'event', name: 'whiteboard-shape', data: { id: 's', by: 'a', ...s } }).ok;
    assert.ok(shape({ kind: 'stroke', points: [], width: 2 }));
    assert.ok(shape({ kind: 'line', x: 0, y: 0, w: 1, h: 1 }));
    assert.ok(shape({ kind: 'ellipse', x: 0, y: 0, w: 1, h: 1, color: 'red' }));
    assert.ok(shape({ kind: 'text', x: 0, y: 0, text: 'hi', size: 12 }));
    assert.ok(!shape({ kind: 'stroke', points: [1, '2'] }));
    assert.ok(!shape({ kind: 'text', x: 0, y: 0 }));
    assert.ok(!shape({ kind: 'blob', x: 0, y: 0 }));
    assert.ok(!shape({ kind: 'constructor' }));
    assert.ok(!shape({ kind: 'line', x: 0, y: 0, w: 1, h: 1, color: 3 }));
    assert.ok(!parseEventFrame({ type: 'event', name: 'whiteboard-shape', data: { kind: 'line', x: 0, y: 0, w: 1, h: 1 } }).ok, 'no id nor author');
  });
});

describe('parseServerFrame, as a property', () => {
  const known = fc.constantFrom('joined', 'lobby', 'join-error', 'response', 'event', 'error', 'pong');
  const events = fc.constantFrom(...(Object.keys(EVENT_SAMPLES) as ServerEventName[]));

  it('never throws on any JSON value, and says ok or a problem', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const parsed = parseServerValue(value);
        assert.ok(parsed.ok === true || typeof parsed.problem === 'string');
        assert.equal(typeof parseServerFrame(JSON.stringify(value)).ok, 'boolean');
      }),
      { numRuns: 2000 },
    );
  });

  it('never throws on any string', () => {
    fc.assert(fc.property(fc.string(), (t) => typeof parseServerFrame(t).ok === 'boolean'), { numRuns: 2000 });
  });

  it('never throws on frames of a known type with random fields, nor on events with random data', () => {
    const fields = fc.dictionary(fc.constantFrom('id', 'v', 'roomId', 'self', 'participants', 'counts', 'outputs', 'lobby', 'resume', 'limits', 'error', 'result', 'name', 'data', 'ttl', 'requestedAt', 'toString', '__proto__'), fc.jsonValue());
    fc.assert(
      fc.property(known, fields, (type, rest) => {
        const parsed = parseServerValue({ ...rest, type });
        assert.ok(parsed.ok === true || typeof parsed.problem === 'string');
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(events, fc.jsonValue(), (name, data) => typeof parseServerValue({ type: 'event', name, data }).ok === 'boolean'),
      { numRuns: 2000 },
    );
  });

  it('accepts every valid event sample with random unknown fields added', () => {
    fc.assert(
      fc.property(events, fc.dictionary(fc.string().map((k) => `x-${k}`), fc.jsonValue()), (name, extra) => {
        const parsed = parseServerValue(JSON.parse(JSON.stringify({ type: 'event', name, data: { ...extra, ...EVENT_SAMPLES[name] } })));
        assert.ok(parsed.ok, name);
      }),
      { numRuns: 500 },
    );
  });
});

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
  transcription: { participantId: 'b', text: 'hello world', final: true, language: 'en', startedAt: 1, endedAt: 2 },
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
  'lobby-resolved': { participantId: 'w', outcome: 5 },
  'unpublish-requested': { source: ['camera'], by: 'a' },
  'output-changed': { output: 'recording', state: 'active', by: 1 },
  'whiteboard-shape': { kind: 'rect', x: 1, y: 2, w: 3, id: 's1', by: 'a' },
  'whiteboard-cleared': null,
  'track-published': { participantId: 'b', source: 'microphone', kind: 'audio' },
  'track-unpublished': { participantId: 'b' },
  'track-mute': { participantId: 'b', source: 'camera', muted: 'no' },
  'subscription-ended': [],
  'force-unpublished': { source: 'camera' },
  transcription: { participantId: 'b', text: 'hello', final: true, language: 'en', startedAt: '1', endedAt: 2 },
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
      [(j) => (j.self.grant.canPublishSources = ['camera', 5 as never]), /grant/],
      [(j) => (j.participants = [j.participants[0]!, { id: 'x' } as never]), /participants\[1\]/],
      [(j) => ((j.participants[0]!.tracks[0] as Record<string, unknown>).muted = 0), /participants\[0\]/],
      [(j) => ((j.counts as Record<string, unknown>).total = null), /counts/],
      [(j) => delete (j.outputs as Record<string, unknown>).whiteboard, /whiteboard/],
      [(j) => ((j.outputs.hls as Record<string, unknown>).by = 1), /hls/],
      [(j) => ((j.outputs.recording as Record<string, unknown>).state = 1), /recording/],
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

  it('parses every other frame type, keeping codes this SDK does not know and normalising kinds and reasons', () => {
    assert.deepEqual(parseServerFrame('{"type":"pong","x":1}'), { ok: true, value: { type: 'pong' } });
    assert.deepEqual(parseServerFrame('{"type":"lobby","requestedAt":5,"ttl":60}'), { ok: true, value: { type: 'lobby', requestedAt: 5, ttl: 60 } });
    assert.equal(parseServerFrame('{"type":"lobby","requestedAt":5}').ok, false);
    const future = { code: 'SHINY_NEW_CODE', message: 'm', reason: 'new-reason', kind: 'NewKind' };
    assert.deepEqual(parseServerFrame(text({ type: 'join-error', error: future })), {
      ok: true,
      value: { type: 'join-error', error: { code: 'SHINY_NEW_CODE', message: 'm', kind: 'Request' } },
    });
    assert.deepEqual(parseServerFrame(text({ type: 'error', error: { code: 'RATE_LIMITED', message: 'slow', extra: 1 } })), {
      ok: true,
      value: { type: 'error', error: { code: 'RATE_LIMITED', message: 'slow', kind: 'Request' } },
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
      value: { type: 'response', id: 3, error: { code: 'NOT_FOUND', message: 'm', kind: 'Request' } },
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
    // a type this SDK does not know is marked (a newer relay's frame: the handshake ignores it); not a missing or non-string one
    for (const t of ['{"type":"hello"}', '{"type":"__proto__"}', '{"type":"toString"}']) assert.deepEqual((parseServerFrame(t) as { unknown?: true }).unknown, true, t);
    for (const t of ['nope', '{}', '{"type":7}', '{"type":{"toString":1}}', '{"type":"joined"}']) assert.equal((parseServerFrame(t) as { unknown?: true }).unknown, undefined, t);
  });
});

describe('compatibility: relays of neighbouring versions', () => {
  const joined = (spoil: (j: typeof JOINED & Record<string, unknown>) => void) => {
    const j = clone(JOINED) as typeof JOINED & Record<string, unknown>;
    spoil(j);
    return parseServerValue(j);
  };
  const event = (name: string, data: unknown) => parseEventFrame({ type: 'event', name, data });

  it("an older relay's output info of another shape is left out of joined, never a failed join", () => {
    const parsed = joined((j) => {
      (j.outputs as Record<string, unknown>).whiteboard = { state: 'active', by: 'a', info: { maxBytes: '65536' } };
      (j.outputs.hls.info as Record<string, unknown>).playlist = 1;
    });
    assert.ok(parsed.ok, parsed.ok ? '' : parsed.problem);
    assert.ok(parsed.value?.type === 'joined');
    assert.deepEqual(parsed.value.outputs.whiteboard, { state: 'active', by: 'a' });
    assert.deepEqual(parsed.value.outputs.hls, { state: 'active', by: 'a' });
  });

  it('a joined with an output this SDK does not know keeps the known ones; an output in a state it does not know is taken as stopped', () => {
    const parsed = joined((j) => {
      (j.outputs as Record<string, unknown>).hologram = { state: 'active', info: { x: 1 } };
      (j.outputs as Record<string, unknown>).recording = { state: 'paused', by: 'a' };
    });
    assert.ok(parsed.ok && parsed.value?.type === 'joined', parsed.ok ? '' : parsed.problem);
    assert.deepEqual(Object.keys(parsed.value.outputs), ['recording', 'hls', 'livestream', 'transcription', 'whiteboard']);
    assert.deepEqual(parsed.value.outputs.recording, { state: 'stopped' });
    assert.deepEqual(parsed.value.outputs.hls, JOINED.outputs.hls);
  });

  it('a source this SDK does not know is left out of the grant; a grant it knows whole is not copied', () => {
    const input = clone(JOINED);
    const same = parseServerValue(input);
    assert.ok(same.ok && same.value?.type === 'joined');
    assert.equal(same.value.self.grant, input.self.grant, 'checked in place');
    const parsed = joined((j) => (j.self.grant.canPublishSources = ['camera', 'hologram', 'microphone']));
    assert.ok(parsed.ok && parsed.value?.type === 'joined', parsed.ok ? '' : parsed.problem);
    assert.deepEqual(parsed.value.self.grant, { ...JOINED.self.grant, canPublishSources: ['camera', 'microphone'] });
  });

  it('a track of a source or kind this SDK does not know is left out of a participant; the others are kept, uncopied', () => {
    const input = clone(JOINED);
    const known = { id: 'c', name: 'C', joinedAt: 2, tracks: [{ source: 'microphone', kind: 'audio', muted: true }] };
    input.participants = [
      { id: 'b', name: 'Bob', joinedAt: 1, tracks: [{ source: 'camera', kind: 'video', muted: false }, { source: 'hologram', kind: 'video', muted: false }, { source: 'screen', kind: 'depth', muted: false }] },
      known,
    ];
    const parsed = parseServerValue(input);
    assert.ok(parsed.ok && parsed.value?.type === 'joined', parsed.ok ? '' : parsed.problem);
    assert.deepEqual(parsed.value.participants, [{ id: 'b', name: 'Bob', joinedAt: 1, tracks: [{ source: 'camera', kind: 'video', muted: false }] }, known]);
    assert.equal(parsed.value.participants[1], known, 'a participant this SDK knows whole is not copied');
    assert.equal((input.participants[0]!.tracks as unknown[]).length, 3, 'the input is left alone');
    // all known: the very array
    const all = clone(JOINED);
    const whole = parseServerValue(all);
    assert.ok(whole.ok && whole.value?.type === 'joined');
    assert.equal(whole.value.participants, all.participants, 'checked in place, not copied');
    // a malformed track is still malformed
    assert.equal(joined((j) => ((j.participants[0]!.tracks[0] as Record<string, unknown>).source = 5)).ok, false);
    assert.deepEqual(event('participant-joined', { id: 'b', name: 'Bob', joinedAt: 1, tracks: [{ source: 'hologram', kind: 'video', muted: false }, { source: 'camera', kind: 'video', muted: true }] }), {
      ok: true,
      value: { type: 'event', name: 'participant-joined', data: { id: 'b', name: 'Bob', joinedAt: 1, tracks: [{ source: 'camera', kind: 'video', muted: true }] } },
    });
    assert.equal(event('participant-joined', { id: 'b', name: 'Bob', joinedAt: 1, tracks: [{ source: 'camera', kind: 'video' }] }).ok, false);
  });

  it('an event whose discriminating value this SDK does not know is ignored, silently; a malformed one is still malformed', () => {
    const newer: Array<[ServerEventName, unknown]> = [
      ['track-published', { participantId: 'b', source: 'hologram', kind: 'video', muted: false }],
      ['track-published', { participantId: 'b', source: 'camera', kind: 'depth', muted: false }],
      ['track-unpublished', { participantId: 'b', source: 'hologram' }],
      ['track-mute', { participantId: 'b', source: 'hologram', muted: true }],
      ['unpublish-requested', { source: 'hologram', by: 'a' }],
      ['force-unpublished', { source: 'hologram', by: 'a' }],
      ['lobby-resolved', { participantId: 'w', outcome: 'expired', by: 'a' }],
      ['output-changed', { output: 'recording', state: 'paused' }],
      ['output-changed', { output: 'hologram', state: 'active' }],
    ];
    for (const [name, data] of newer) assert.deepEqual(event(name, data), { ok: true, value: null }, `${name} ${text(data)}`);
    const malformed: Array<[ServerEventName, unknown]> = [
      ['track-published', { participantId: 'b', source: 1, kind: 'video', muted: false }],
      ['track-published', { participantId: 'b', source: 'camera', kind: null, muted: false }],
      ['lobby-resolved', { participantId: 'w', outcome: ['admitted'] }],
      ['output-changed', { output: 'recording', state: null }],
    ];
    for (const [name, data] of malformed) assert.equal(event(name, data).ok, false, `${name} ${text(data)}`);
  });

  it('received errors are normalised: the code kept, the kind filled in, a reason this SDK does not know left out', () => {
    const frameError = (error: unknown) => {
      const parsed = parseServerValue({ type: 'error', error });
      assert.ok(parsed.ok && parsed.value?.type === 'error', text(error));
      return parsed.value.error;
    };
    // an older relay (no kind): the code's kind
    assert.deepEqual(frameError({ code: 'INVALID_STATE', message: 'm', reason: 'output-not-active' }), { code: 'INVALID_STATE', message: 'm', reason: 'output-not-active', kind: 'State' });
    assert.deepEqual(frameError({ code: 'INTERNAL_ERROR', message: 'm' }), { code: 'INTERNAL_ERROR', message: 'm', kind: 'Network' });
    // a known code: its own kind, whatever the wire says
    assert.deepEqual(frameError({ code: 'INVALID_TOKEN', message: 'm', kind: 'Lobby' }), { code: 'INVALID_TOKEN', message: 'm', kind: 'Auth' });
    // a newer code: the wire's kind when known, else Request; a newer reason left out
    assert.deepEqual(frameError({ code: 'ROOM_FROZEN', message: 'm', kind: 'State', reason: 'frozen' }), { code: 'ROOM_FROZEN', message: 'm', kind: 'State' });
    assert.deepEqual(frameError({ code: 'ROOM_FROZEN', message: 'm', kind: 'Weather' }), { code: 'ROOM_FROZEN', message: 'm', kind: 'Request' });
    assert.deepEqual(frameError({ code: 'ROOM_FROZEN', message: 'm' }), { code: 'ROOM_FROZEN', message: 'm', kind: 'Request' });
    // in an aborted stream and a failed output too
    assert.deepEqual(event('stream.abort', { streamId: 1, error: { code: 'CONNECTION_LOST', message: 'gone', reason: 'sender-vanished' } }), {
      ok: true,
      value: { type: 'event', name: 'stream.abort', data: { streamId: 1, error: { code: 'CONNECTION_LOST', message: 'gone', kind: 'Network' } } },
    });
    assert.deepEqual(event('output-changed', { output: 'hls', state: 'failed', error: { code: 'FFMPEG_EXPLODED', kind: 'Boom', message: 'x', reason: 'provider-failed' } }), {
      ok: true,
      value: { type: 'event', name: 'output-changed', data: { output: 'hls', state: 'failed', error: { code: 'FFMPEG_EXPLODED', kind: 'Request', message: 'x', reason: 'provider-failed' } } },
    });
    const failed = joined((j) => ((j.outputs.transcription as Record<string, unknown>).error = { code: 'INTERNAL_ERROR', message: 'boom' }));
    assert.ok(failed.ok && failed.value?.type === 'joined');
    assert.deepEqual(failed.value.outputs.transcription.error, { code: 'INTERNAL_ERROR', message: 'boom', kind: 'Network' });
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

  it('output-changed: info checked per output, left out when it does not fit; an output or a state this SDK does not know is ignored', () => {
    const change = (data: unknown) => parseEventFrame({ type: 'event', name: 'output-changed', data });
    assert.deepEqual(change({ output: 'hls', state: 'active', info: { playlist: '/p.m3u8' } }), {
      ok: true,
      value: { type: 'event', name: 'output-changed', data: { output: 'hls', state: 'active', info: { playlist: '/p.m3u8' } } },
    });
    // an info of another shape (a relay of another version): the status without it, never a failed frame
    assert.deepEqual(change({ output: 'hls', state: 'active', by: 'a', info: { maxBytes: 5 } }), {
      ok: true,
      value: { type: 'event', name: 'output-changed', data: { output: 'hls', state: 'active', by: 'a' } },
    });
    assert.deepEqual(change({ output: 'whiteboard', state: 'active', info: { maxBytes: '65536' } }), {
      ok: true,
      value: { type: 'event', name: 'output-changed', data: { output: 'whiteboard', state: 'active' } },
    });
    assert.deepEqual(change({ output: 'recording', state: 'stopped', info: 'x' }).ok, true);
    // a newer relay's output or state: ignored, like an unknown event
    assert.deepEqual(change({ output: 'hologram', state: 'active', info: { anything: 1 } }), { ok: true, value: null });
    assert.deepEqual(change({ output: 'hls', state: 'paused' }), { ok: true, value: null });
    assert.deepEqual(change({ output: 'toString', state: 'active' }), { ok: true, value: null });
    // malformed
    assert.equal(change({ output: 'hls', state: 3 }).ok, false);
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

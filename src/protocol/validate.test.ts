import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode, ErrorKind, kindOf } from './codes.ts';
import { claimShapeProblem } from './grant.ts';
import { parseClientFrame } from './validate.ts';

describe('parseClientFrame', () => {
  it('accepts a join frame and a request frame', () => {
    const join = parseClientFrame(JSON.stringify({ type: 'join', v: 1, token: 't', participantId: 'p', roomId: 'r', name: 'N', extra: 1 }));
    assert.deepEqual(join, { ok: true, value: { type: 'join', v: 1, token: 't', participantId: 'p', roomId: 'r', name: 'N' } });
    const req = parseClientFrame(JSON.stringify({ type: 'request', id: 3, method: 'participants.list', params: { tier: 'viewer', limit: 10 } }));
    assert.deepEqual(req, { ok: true, value: { type: 'request', id: 3, method: 'participants.list', params: { tier: 'viewer', limit: 10 } } });
  });

  it('refuses malformed frames with a problem, keeping the request id when it is readable', () => {
    for (const text of ['', 'nope', '[]', 'null', '42', '{"type":"hello"}', '{"type":"join"}', '{"type":"join","v":1,"token":5,"participantId":"p"}', '{"type":"join","v":1,"token":"t","participantId":""}', `{"type":"join","v":1,"token":"t","participantId":"${'x'.repeat(200)}"}`]) {
      const parsed = parseClientFrame(text);
      assert.equal(parsed.ok, false, text);
    }
    const bad = parseClientFrame('{"type":"request","id":9,"method":"nope"}');
    assert.ok(!bad.ok && bad.id === 9);
    const badParams = parseClientFrame('{"type":"request","id":4,"method":"participants.list","params":{"tier":"everyone"}}');
    assert.ok(!badParams.ok && badParams.id === 4 && /tier/.test(badParams.problem));
    assert.equal(parseClientFrame('{"type":"request","id":-1,"method":"room.end"}').ok, false);
    assert.equal(parseClientFrame('{"type":"request","id":1.5,"method":"room.end"}').ok, false);
    assert.equal(parseClientFrame('{"type":"request","id":1,"method":"room.end","params":[]}').ok, false);
  });

  it('ids must be well-formed (a lone surrogate has no UTF-8 form: it would come back from Redis or a file name as another id); pairs are fine', () => {
    for (const [participantId, roomId] of [['p\\ud800', 'r'], ['p', 'r\\ud800'], ['\\udc00p', 'r'], ['p', 'r\\udbff\\udbff']]) {
      const parsed = parseClientFrame(`{"type":"join","v":1,"token":"t","participantId":"${participantId}","roomId":"${roomId}"}`);
      assert.ok(!parsed.ok && /well-formed/.test(parsed.problem), `${participantId} ${roomId}`);
    }
    assert.ok(parseClientFrame('{"type":"join","v":1,"token":"t","participantId":"p\\ud83d\\ude00","roomId":"r\\u00e9"}').ok);
    const claims = (extra: Record<string, unknown>) => claimShapeProblem({ iss: 'k', exp: 1, grant: {}, ...extra });
    assert.equal(claims({ roomId: 'r\ud800' })?.claim, 'roomId');
    assert.equal(claims({ participantId: '\udfff' })?.claim, 'participantId');
    assert.equal(claims({ roomId: 'r\ud83d\ude00', participantId: 'p' }), null);
  });

  it('ids may not hold control characters (C0, DEL, C1) or bidi embedding, override and isolate controls: they forge what a log, roster or dashboard shows', () => {
    // and the invisible ones with which two different ids look the same (zero-width space, joiners, direction marks, Arabic letter mark, BOM), and the line separators;
    // and (an attack review: `bob\u2060` spoke as bob) every default-ignorable and format character and every space but U+0020
    const refused = ['\u0000', '\u0009', '\n', '\r', '\u001b', '\u001f', '\u007f', '\u0080', '\u0085', '\u009f', '\u202a', '\u202d', '\u202e', '\u2066', '\u2068', '\u2069', '\u200b', '\u200c', '\u200d', '\u200e', '\u200f', '\u061c', '\ufeff', '\u2028', '\u2029',
      '\u2060', '\u00ad', '\u2061', '\u2064', '\u180e', '\u034f', '\ufe0f', '\u3164', '\u{e0020}', '\u115f', '\uffa0', '\u17b4', '\u00a0', '\u202f', '\u2003', '\u3000', '\u205f',
      '\u2800', '\ufffc', '\u{1d159}', '\u{16fe4}', '\ue000', '\u0378', '\uffff', '  ', ' \u0301'];
    const request = (method: string, params: unknown) => parseClientFrame(JSON.stringify({ type: 'request', id: 1, method, params }));
    for (const c of refused) {
      const id = `evil${c}nimda`;
      const join = (participantId: string, roomId: string) => parseClientFrame(JSON.stringify({ type: 'join', v: 1, token: 't', participantId, roomId }));
      const asParticipant = join(id, 'r');
      assert.ok(!asParticipant.ok && /participantId/.test(asParticipant.problem) && /control/.test(asParticipant.problem), JSON.stringify(c));
      const asRoom = join('p', id);
      assert.ok(!asRoom.ok && /roomId/.test(asRoom.problem), JSON.stringify(c));
      assert.equal(request('participant.remove', { participantId: id }).ok, false, JSON.stringify(c));
      assert.equal(request('pubsub.publish', { topic: 't', payload: 1, to: ['ok', id] }).ok, false, JSON.stringify(c));
      assert.equal(request('lobby.admit', { participantIds: [id] }).ok, false, JSON.stringify(c));
      assert.equal(request('participant.request-unpublish', { participantId: id, source: 'camera' }).ok, false, JSON.stringify(c));
      assert.equal(request('media.subscribe', { participantId: id, source: 'camera' }).ok, false, JSON.stringify(c));
      assert.equal(request('media.unsubscribe', { subscriptionId: id }).ok, false, JSON.stringify(c));
      const claims = (extra: Record<string, unknown>) => claimShapeProblem({ iss: 'k', exp: 1, grant: {}, ...extra });
      assert.equal(claims({ roomId: id })?.claim, 'roomId', JSON.stringify(c));
      assert.equal(claims({ participantId: id })?.claim, 'participantId', JSON.stringify(c));
    }
    // their neighbours, and letters of right-to-left scripts, are ids like any other
    for (const id of ['a b', 'a~b', 'caf\u00e9', '\u05e9\u05dc\u05d5\u05dd', 'p\ud83d\ude00', '\u0928\u092e\u0938\u094d\u0924\u0947', '\u540d\u524d', 'ana\u2764\ufe0f', '1\ufe0f\u20e3', '\u0e44\u0e17\u0e22']) {
      assert.ok(parseClientFrame(JSON.stringify({ type: 'join', v: 1, token: 't', participantId: id, roomId: id })).ok, JSON.stringify(id));
      assert.equal(claimShapeProblem({ iss: 'k', exp: 1, grant: {}, roomId: id, participantId: id }), null, JSON.stringify(id));
    }
    // a space may not start or end an id (`bob ` is `bob` on a screen)
    for (const id of [' bob', 'bob ', ' ']) assert.equal(parseClientFrame(JSON.stringify({ type: 'join', v: 1, token: 't', participantId: id, roomId: 'r' })).ok, false, JSON.stringify(id));
  });

  it('a display name may not hold control, line-separator or bidi embedding, override and isolate characters; the marks and joiners scripts and emoji need are names like any other', () => {
    const join = (name: string) => parseClientFrame(JSON.stringify({ type: 'join', v: 1, token: 't', participantId: 'p', name }));
    for (const c of ['\u0000', '\n', '\u001b', '\u007f', '\u0085', '\u2028', '\u2029', '\u202e', '\u2067']) {
      const parsed = join(`Ada${c}Lovelace`);
      assert.ok(!parsed.ok && /^name must not hold/.test(parsed.problem) && parsed.problem.includes(`U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`), JSON.stringify(c));
    }
    for (const name of ['Ada Lovelace', '\u05e9\u05dc\u05d5\u05dd \u200f(Shalom)', '\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67 family', 'a\u200cb', 'caf\u00e9']) {
      assert.ok(join(name).ok, JSON.stringify(name));
    }
  });

  it('a token claim naming a room or participant the join frame could never name (over 128 characters) is refused at its shape', () => {
    const long = 'r'.repeat(129);
    assert.deepEqual(claimShapeProblem({ iss: 'k', exp: 1, grant: {}, roomId: long }), { claim: 'roomId', problem: 'must be at most 128 characters (it has 129)' });
    assert.equal(claimShapeProblem({ iss: 'k', exp: 1, grant: {}, participantId: long })?.claim, 'participantId');
    assert.equal(claimShapeProblem({ iss: 'k', exp: 1, grant: {}, roomId: 'r'.repeat(128), participantId: 'p'.repeat(128) }), null);
  });

  it('never throws on hostile objects where a string is expected (a toString that is not a function)', () => {
    for (const text of [
      '{"type":{"toString":1}}',
      '{"type":{"toString":1,"valueOf":1}}',
      '{"type":"request","id":1,"method":{"toString":1}}',
      '{"type":"request","id":1,"method":{"valueOf":{}, "toString":{}}}',
      '{"type":"join","v":1,"token":"t","participantId":{"toString":1}}',
      '{"type":"resume","v":{"valueOf":1},"credential":{"toString":1}}',
      '{"type":"request","id":1,"method":"pubsub.publish","params":{"topic":{"toString":1},"payload":1}}',
    ]) {
      const parsed = parseClientFrame(text);
      assert.equal(parsed.ok, false, text);
    }
  });

  it('checks participants.list limits', () => {
    const list = (params: unknown) => parseClientFrame(JSON.stringify({ type: 'request', id: 1, method: 'participants.list', params }));
    for (const limit of [0, 1001, 5000, 'abc', 2.5, -1]) assert.equal(list({ tier: 'viewer', limit }).ok, false, String(limit));
    for (const limit of [1, 100, 1000]) assert.equal(list({ tier: 'viewer', limit }).ok, true);
    assert.equal(list({ tier: 'viewer', cursor: 5 }).ok, false);
    assert.equal(list({ tier: 'speaker', cursor: null }).ok, true);
  });

  it('stream.leave names one stream, or 1 to 256 at once', () => {
    const leave = (params: unknown) => parseClientFrame(JSON.stringify({ type: 'request', id: 1, method: 'stream.leave', params }));
    for (const params of [{ streamId: 7 }, { streamIds: [7] }, { streamIds: Array.from({ length: 256 }, (_, i) => i) }]) assert.equal(leave(params).ok, true, JSON.stringify(params).slice(0, 40));
    for (const params of [{}, { streamIds: [] }, { streamIds: Array.from({ length: 257 }, (_, i) => i) }, { streamIds: [1, -1] }, { streamIds: [1.5] }, { streamIds: ['1'] }, { streamIds: 1 }, { streamId: 1, streamIds: [2] }]) {
      assert.equal(leave(params).ok, false, JSON.stringify(params).slice(0, 40));
    }
  });
});

describe('codes', () => {
  it('every code is its own string and has a kind', () => {
    for (const [key, value] of Object.entries(ErrorCode)) {
      assert.equal(key, value);
      assert.ok(Object.values(ErrorKind).includes(kindOf(value)));
    }
    assert.equal(kindOf('INVALID_ENTRY_CLAIM'), 'Auth');
    assert.ok(Object.isFrozen(ErrorCode) && Object.isFrozen(ErrorKind));
  });
});

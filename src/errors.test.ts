import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SdkError } from './errors.ts';
import { CloseCode, ERROR_REASONS, ErrorCode, ErrorKind, kindOf, reasonForClose, wireError, type DisconnectReason, type WireError } from './protocol/codes.ts';
import { parseClientFrame } from './protocol/validate.ts';

describe('the error model (issue 12)', () => {
  it('a wire error whose kind is not its code\'s does not compile', () => {
    // @ts-expect-error INVALID_TOKEN is of kind Auth
    const wrong: WireError = { code: 'INVALID_TOKEN', kind: 'Network', message: '' };
    const right: WireError = { code: 'INVALID_TOKEN', kind: 'Auth', message: '' };
    assert.deepEqual(wireError('INVALID_TOKEN', ''), right);
    assert.notDeepEqual(wrong, right);
  });

  it('state conflicts are of kind State', () => {
    assert.equal(kindOf(ErrorCode.INVALID_STATE), ErrorKind.State);
    assert.equal(SdkError.fromWire(wireError('INVALID_STATE', 'already active', 'output-already-active')).kind, 'State');
  });

  it('a code from a newer relay keeps its string and takes the kind sent with it', () => {
    const err = SdkError.fromWire({ code: 'QUOTA_EXCEEDED', kind: 'Request', message: 'over quota', reason: 'some-new-reason' });
    assert.ok(err instanceof SdkError);
    assert.equal(err.code, 'QUOTA_EXCEEDED');
    assert.equal(err.kind, ErrorKind.Request);
    assert.equal(err.reason, undefined, 'an unknown reason is left out');
    assert.equal(SdkError.fromWire({ code: 'NEW_AUTH_THING', kind: 'Auth', message: '' }).kind, 'Auth');
    assert.equal(SdkError.fromWire({ code: 'NO_KIND', message: '' }).kind, 'Request');
    assert.equal(SdkError.fromWire({ code: 'BAD_KIND', kind: 'Nonsense', message: '' }).kind, 'Request');
    // a known code decides its own kind, whatever the wire says
    assert.equal(SdkError.fromWire({ code: 'INVALID_TOKEN', kind: 'Network', message: '' }).kind, 'Auth');
  });

  it('reasons are one list: every reason the wire carries is typed, and known reasons survive fromWire', () => {
    for (const reason of ERROR_REASONS) assert.equal(SdkError.fromWire({ code: 'NOT_FOUND', message: '', reason }).reason, reason);
    assert.equal(new Set(ERROR_REASONS).size, ERROR_REASONS.length, 'no reason twice');
  });

  it('close codes and disconnect reasons come from one table', () => {
    assert.equal(reasonForClose(CloseCode.REMOVED), 'removed');
    assert.equal(reasonForClose(CloseCode.ROOM_ENDED), 'room-ended');
    assert.equal(reasonForClose(CloseCode.LEFT), 'left');
    assert.equal(reasonForClose(CloseCode.SERVER_SHUTDOWN), 'server-shutdown');
    assert.equal(reasonForClose(CloseCode.SLOW_CONSUMER), 'connection-lost');
    assert.equal(reasonForClose(1006), 'connection-lost');
    // every disconnect reason is one a close code gives (or a lost connection), but a rejoin denied in the lobby
    const given = new Set([...Object.values(CloseCode).map(reasonForClose), reasonForClose(1006), 'denied']);
    const all: Record<DisconnectReason, true> = { left: true, removed: true, 'room-ended': true, 'duplicate-identity': true, denied: true, 'server-shutdown': true, 'connection-lost': true };
    assert.deepEqual([...given].sort(), Object.keys(all).sort());
    assert.equal(new Set(Object.values(CloseCode)).size, Object.keys(CloseCode).length, 'no code twice');
  });
});

describe('output options are typed per output and checked by the protocol', () => {
  const start = (output: string, options?: unknown) => parseClientFrame(JSON.stringify({ type: 'request', id: 1, method: 'output.start', params: { output, ...(options === undefined ? {} : { options }) } }));
  it('accepts each output with its own options', () => {
    assert.ok(start('livestream', { url: 'rtmp://example.com/live/key' }).ok);
    assert.ok(start('hls', { segmentSeconds: 2 }).ok);
    assert.ok(start('transcription', { language: 'en-US' }).ok);
    assert.ok(start('recording').ok);
    assert.ok(start('recording', {}).ok);
  });
  it('refuses unknown option names, wrong types and out-of-range values', () => {
    for (const [output, options] of [
      ['recording', { format: 'mp4' }],
      ['hls', { segmentSecond: 2 }],
      ['hls', { segmentSeconds: 0.1 }],
      ['hls', { segmentSeconds: '2' }],
      ['livestream', {}],
      ['livestream', { url: 42 }],
      ['livestream', { url: 'x'.repeat(5000) }],
      ['transcription', { language: 'english please' }],
      ['whiteboard', { colour: 'red' }],
    ] as const) {
      const parsed = start(output, options);
      assert.equal(parsed.ok, false, `${output} ${JSON.stringify(options).slice(0, 40)}`);
    }
  });
});

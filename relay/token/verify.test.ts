import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { KeyStore } from './keys.ts';
import { checkScope, headerRemembered, verifyToken, type VerifyOptions } from './verify.ts';

const SECRET = 'unit-secret-0123456789';
const NOW = 1_800_000_000;
const keys = new KeyStore({ k1: SECRET, old: 'old-secret-0123456789' }, ['old']);
const opts: VerifyOptions = { keys, maxTtlRoom: 86400, maxTtlDomain: 3600, now: NOW };

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

/** Sign any header and payload (objects, or raw strings), as an attacker or a buggy backend might. */
function sign(header: unknown, payload: unknown, secret = SECRET): string {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}
const HS = { alg: 'HS256', typ: 'JWT' };
const base = { iss: 'k1', exp: NOW + 600, grant: { canPublish: true }, roomId: 'r' };
const token = (payload: Record<string, unknown> = {}) => sign(HS, { ...base, ...payload });

function refused(t: unknown, code: string, reason: string, o: VerifyOptions = opts) {
  const v = verifyToken(t, o);
  assert.equal(v.ok, false, `expected ${code}/${reason}`);
  if (!v.ok) {
    assert.equal(v.code, code);
    assert.equal(v.reason, reason);
    assert.ok(v.message.length > 0);
  }
}

describe('verifyToken: step 1, shape', () => {
  it('accepts a well-formed token', () => {
    const v = verifyToken(token(), opts);
    assert.ok(v.ok);
    assert.equal(v.ok && v.claims.roomId, 'r');
  });
  it('refuses a missing, empty or non-string token', () => {
    for (const t of [undefined, null, '', 42, {}]) refused(t, 'INVALID_TOKEN', 'missing');
  });
  it('refuses anything but three base64url parts', () => {
    const good = token();
    const [h, p, s] = good.split('.');
    for (const t of ['abc', `${h}.${p}`, `${good}.x`, `.${p}.${s}`, `${h}.${p}.${s}=`, `${h}.${p}+.${s}`, `${h}!.${p}.${s}`, `${h}.${p}.a`]) {
      refused(t, 'INVALID_TOKEN', 'malformed');
    }
    // an empty signature is a shape: the header and the signature check judge it
    refused(`${h}.${p}.`, 'INVALID_TOKEN', 'bad-signature');
  });
  it('refuses a header or payload that is not a JSON object', () => {
    refused(sign('not json', base), 'INVALID_TOKEN', 'malformed');
    refused(sign([1, 2], base), 'INVALID_TOKEN', 'malformed');
    refused(sign(HS, 'not json'), 'INVALID_TOKEN', 'malformed');
    refused(sign(HS, [base]), 'INVALID_TOKEN', 'malformed');
    refused(sign(HS, null), 'INVALID_TOKEN', 'malformed');
    refused(sign(HS, 7), 'INVALID_TOKEN', 'malformed');
  });
  it('refuses alg none, other algorithms, a missing alg and crit headers', () => {
    for (const alg of ['none', 'None', 'HS384', 'HS512', 'RS256', 'hs256', undefined]) {
      refused(sign({ alg, typ: 'JWT' }, base), 'INVALID_TOKEN', 'unsupported-algorithm');
    }
    refused(`${b64({ alg: 'none' })}.${b64(base)}.${b64('x')}`, 'INVALID_TOKEN', 'unsupported-algorithm');
    refused(sign({ alg: 'HS256', crit: ['exp'] }, base), 'INVALID_TOKEN', 'unsupported-header');
  });
  it('remembers only the headers of tokens whose signature held: 100 junk headers without a key sent first do not keep a real one out', () => {
    for (let i = 0; i < 100; i++) refused(`${b64({ alg: 'HS256', junk: i })}.${b64(base)}.${b64('x'.repeat(32))}`, 'INVALID_TOKEN', 'bad-signature');
    const real = { alg: 'HS256', typ: 'JWT', kid: 'real' };
    assert.equal(verifyToken(sign(real, base), opts).ok, true);
    assert.equal(headerRemembered(b64(real)), true);
    assert.equal(headerRemembered(b64({ alg: 'HS256', junk: 0 })), false);
  });

  it('ignores kid and jku headers (keys are chosen by iss only)', () => {
    assert.ok(verifyToken(sign({ ...HS, kid: 'other', jku: 'http://evil/' }, base), opts).ok);
  });
});

describe('verifyToken: step 2, issuer', () => {
  it('refuses a missing or non-string iss with INVALID_TOKEN', () => {
    refused(token({ iss: undefined }), 'INVALID_TOKEN', 'missing-issuer');
    refused(token({ iss: 42 }), 'INVALID_TOKEN', 'missing-issuer');
    refused(token({ iss: '' }), 'INVALID_TOKEN', 'missing-issuer');
  });
  it('refuses an unknown key and a revoked key with INVALID_API_KEY', () => {
    refused(token({ iss: 'nobody' }), 'INVALID_API_KEY', 'unknown-api-key');
    refused(sign(HS, { ...base, iss: 'old' }, 'old-secret-0123456789'), 'INVALID_API_KEY', 'revoked-api-key');
  });
  it('checks the issuer before the signature', () => {
    refused(sign(HS, { ...base, iss: 'nobody' }, 'wrong'), 'INVALID_API_KEY', 'unknown-api-key');
  });
  it('a reloaded store takes effect at once', () => {
    const store = new KeyStore({ k1: SECRET });
    const o = { ...opts, keys: store };
    assert.ok(verifyToken(token(), o).ok);
    store.replace({ k1: SECRET }, ['k1']);
    refused(token(), 'INVALID_API_KEY', 'revoked-api-key', o);
    store.replace({});
    refused(token(), 'INVALID_API_KEY', 'unknown-api-key', o);
  });
});

describe('verifyToken: step 3, signature', () => {
  it('refuses a wrong secret, a changed payload, a truncated or stripped signature', () => {
    refused(sign(HS, base, 'another-secret'), 'INVALID_TOKEN', 'bad-signature');
    const [h, , s] = token().split('.');
    refused(`${h}.${b64({ ...base, grant: { canModerate: true } })}.${s}`, 'INVALID_TOKEN', 'bad-signature');
    refused(`${h}.${b64(base)}.${s!.slice(0, 20)}`, 'INVALID_TOKEN', 'bad-signature');
    refused(`${h}.${b64(base)}.${s}AAAA`, 'INVALID_TOKEN', 'bad-signature');
  });
});

describe('verifyToken: step 4, time', () => {
  it('refuses a missing or non-numeric exp', () => {
    for (const exp of [undefined, '1900000000', null, true]) refused(token({ exp }), 'INVALID_TOKEN', 'malformed');
  });
  it('accepts exp up to 30 s past (leeway) and refuses beyond', () => {
    assert.ok(verifyToken(token({ exp: NOW - 30 }), opts).ok);
    refused(token({ exp: NOW - 31 }), 'INVALID_TOKEN', 'expired');
  });
  it('accepts nbf up to 30 s ahead (leeway) and refuses beyond', () => {
    assert.ok(verifyToken(token({ nbf: NOW + 30 }), opts).ok);
    refused(token({ nbf: NOW + 31 }), 'INVALID_TOKEN', 'not-yet-valid');
    refused(token({ nbf: 'soon' }), 'INVALID_TOKEN', 'malformed');
  });
  it('checks the signature before time: a forged expired token is a bad signature', () => {
    refused(sign(HS, { ...base, exp: NOW - 1000 }, 'wrong'), 'INVALID_TOKEN', 'bad-signature');
  });
});

describe('verifyToken: step 5, claim shapes', () => {
  const cases: Array<[string, Record<string, unknown>]> = [
    ['grant missing', { grant: undefined }],
    ['grant an array', { grant: [] }],
    ['grant null', { grant: null }],
    ['a flag not boolean', { grant: { canPublish: 'yes' } }],
    ['a flag 1', { grant: { canModerate: 1 } }],
    ['sources not an array', { grant: { canPublishSources: 'camera' } }],
    ['an unknown source', { grant: { canPublishSources: ['camera', 'webcam'] } }],
    ['isViewer not boolean', { isViewer: 'true' }],
    ['roomId empty', { roomId: '' }],
    ['roomId a number', { roomId: 7 }],
    ['participantId empty', { participantId: '' }],
    ['jti not a string', { jti: 5 }],
    ['joinPolicy unknown mode', { joinPolicy: { mode: 'knock' } }],
    ['joinPolicy a string', { joinPolicy: 'ask' }],
    ['ask ttl zero', { joinPolicy: { mode: 'ask', ttl: 0 } }],
    ['ask ttl negative', { joinPolicy: { mode: 'ask', ttl: -5 } }],
    ['ask ttl a string', { joinPolicy: { mode: 'ask', ttl: '60' } }],
  ];
  for (const [name, claims] of cases) it(`refuses ${name}`, () => refused(token(claims), 'INVALID_TOKEN', 'bad-claim'));
  it('accepts the valid shapes and ignores unknown claims and grant keys', () => {
    for (const claims of [
      { grant: {} },
      { grant: { canPublishSources: [] } },
      { grant: { canPublishSources: ['screen'], canFly: 'yes' } },
      { isViewer: true, joinPolicy: { mode: 'direct' } },
      { joinPolicy: { mode: 'ask' } },
      { joinPolicy: { mode: 'ask', ttl: 30 } },
      { participantId: 'p', jti: 'j', whatever: { deep: 1 } },
    ]) assert.ok(verifyToken(token(claims), opts).ok, JSON.stringify(claims));
  });
  it('does not let __proto__ keys reach the grant', () => {
    const t = sign(HS, JSON.parse(`{"iss":"k1","exp":${NOW + 60},"roomId":"r","grant":{"__proto__":{"canModerate":true}}}`));
    const v = verifyToken(t, opts);
    assert.ok(v.ok);
    assert.equal(v.ok && v.claims.grant.canModerate, undefined);
  });
});

describe('verifyToken: step 6, lifetime ceilings', () => {
  it('room-scoped tokens may live up to --max-ttl-room', () => {
    assert.ok(verifyToken(token({ exp: NOW + 86400 }), opts).ok);
    refused(token({ exp: NOW + 86401 }), 'INVALID_TOKEN', 'lifetime-too-long');
  });
  it('domain-wide tokens only up to --max-ttl-domain', () => {
    assert.ok(verifyToken(token({ roomId: undefined, exp: NOW + 3600 }), opts).ok);
    refused(token({ roomId: undefined, exp: NOW + 3601 }), 'INVALID_TOKEN', 'lifetime-too-long');
  });
});

describe('verifyToken: step 7, domain-wide guardrails', () => {
  for (const flag of ['canModerate', 'canRecord', 'canHls', 'canLivestream']) {
    it(`refuses ${flag} without roomId`, () => {
      refused(token({ roomId: undefined, grant: { [flag]: true } }), 'INVALID_TOKEN', 'privileged-grant-needs-room');
    });
  }
  it('allows join, media and data flags (and transcription, whiteboard) without roomId', () => {
    const grant = { canPublish: true, canSubscribe: true, canPublishData: true, canSubscribeData: true, canTranscribe: true, canWhiteboard: true, canModerate: false };
    assert.ok(verifyToken(token({ roomId: undefined, grant }), opts).ok);
  });
});

describe('verifyToken: step 8 and the order of steps', () => {
  it("refuses ask + canModerate with INVALID_ENTRY_CLAIM", () => {
    refused(token({ joinPolicy: { mode: 'ask' }, grant: { canModerate: true } }), 'INVALID_ENTRY_CLAIM', 'ask-with-moderate');
  });
  it('the first failing step decides', () => {
    // steps 6 and 8 both fail: 6 wins
    refused(token({ exp: NOW + 90000, joinPolicy: { mode: 'ask' }, grant: { canModerate: true } }), 'INVALID_TOKEN', 'lifetime-too-long');
    // steps 7 and 8 both fail: 7 wins
    refused(token({ roomId: undefined, joinPolicy: { mode: 'ask' }, grant: { canModerate: true } }), 'INVALID_TOKEN', 'privileged-grant-needs-room');
    // steps 4 and 5 both fail: 4 wins
    refused(token({ exp: NOW - 100, grant: null }), 'INVALID_TOKEN', 'expired');
  });
});

describe('checkScope: steps 9 and 10', () => {
  const claims = { iss: 'k1', exp: NOW + 60, grant: {} };
  it('refuses another room than the token names', () => {
    assert.equal(checkScope({ ...claims, roomId: 'a' }, 'b', 'p')?.code, 'UNAUTHORIZED_ROOM');
    assert.equal(checkScope({ ...claims, roomId: 'a' }, 'a', 'p'), null);
    assert.equal(checkScope(claims, 'anything', 'p'), null);
  });
  it('refuses another identity than the token pins', () => {
    assert.equal(checkScope({ ...claims, participantId: 'ada' }, 'r', 'bob')?.code, 'UNAUTHORIZED_PARTICIPANT');
    assert.equal(checkScope({ ...claims, participantId: 'ada' }, 'r', 'ada'), null);
  });
  it('room before participant', () => {
    assert.equal(checkScope({ ...claims, roomId: 'a', participantId: 'ada' }, 'b', 'bob')?.code, 'UNAUTHORIZED_ROOM');
  });
});

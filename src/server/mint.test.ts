import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeyStore } from '../../relay/token/keys.ts';
import { verifyToken } from '../../relay/token/verify.ts';
import { SdkError } from '../errors.ts';
import { mintToken, parseTtl } from './mint.ts';

const keys = new KeyStore({ app: 'mint-secret-0123456789' });
const base = { apiKey: 'app', secret: 'mint-secret-0123456789' };

describe('mintToken', () => {
  it('mints a token the relay verifies, with exp = now + ttl', () => {
    const token = mintToken({ ...base, roomId: 'r', participantId: 'p', isViewer: true, grant: { canSubscribe: true }, ttl: '15m', now: 1_000_000 });
    const v = verifyToken(token, { keys, maxTtlRoom: 86400, maxTtlDomain: 3600, now: 1_000_000 });
    assert.ok(v.ok);
    if (v.ok) {
      assert.equal(v.claims.exp, 1_000_000 + 900);
      assert.equal(v.claims.iat, 1_000_000);
      assert.equal(v.claims.iss, 'app');
      assert.equal(v.claims.isViewer, true);
      assert.equal(v.claims.participantId, 'p');
    }
  });

  it('refuses what the relay would refuse, with the relay\'s code', () => {
    assert.throws(() => mintToken({ ...base, grant: { canModerate: true } }), (e: SdkError) => e.code === 'INVALID_TOKEN' && e.reason === 'privileged-grant-needs-room');
    assert.throws(
      () => mintToken({ ...base, roomId: 'r', grant: { canModerate: true }, joinPolicy: { mode: 'ask' } }),
      (e: SdkError) => e.code === 'INVALID_ENTRY_CLAIM' && e.kind === 'Auth',
    );
    assert.throws(() => mintToken({ ...base, roomId: 'r', grant: { canPublish: 'yes' as never } }), (e: SdkError) => e.reason === 'bad-claim');
    assert.throws(() => mintToken({ ...base, apiKey: '', grant: {} }), (e: SdkError) => e.code === 'INVALID_ARGUMENT');
    assert.throws(() => mintToken({ ...base, secret: '', grant: {} }), (e: SdkError) => e.code === 'INVALID_ARGUMENT');
  });

  it('refuses room and participant ids holding control or bidi control characters, naming the claim and the character', () => {
    for (const [field, value, char] of [
      ['roomId', 'lobby\u202egnp.exe', 'U+202E'],
      ['roomId', 'a\nb', 'U+000A'],
      ['participantId', 'bob\u001b[31m', 'U+001B'],
      ['participantId', 'x\u0085', 'U+0085'],
      ['participantId', '\u2067alice', 'U+2067'],
      ['participantId', 'ad\u200ba', 'U+200B'],
      ['roomId', '\ufeffroom', 'U+FEFF'],
    ] as const) {
      assert.throws(
        () => mintToken({ ...base, roomId: 'r', [field]: value, grant: {} }),
        (e: SdkError) => e.code === 'INVALID_TOKEN' && e.reason === 'bad-claim' && e.message.startsWith(`${field} must not hold control`) && e.message.includes(char),
        `${field} ${JSON.stringify(value)}`,
      );
    }
    assert.doesNotThrow(() => mintToken({ ...base, roomId: 'caf\u00e9 \u05e9\u05dc\u05d5\u05dd', participantId: 'bob smith', grant: {} }));
  });

  it('refuses a room or participant id longer than a join frame can name (128 characters) at mint time, not at every join', () => {
    assert.throws(
      () => mintToken({ ...base, roomId: 'r'.repeat(129), grant: {} }),
      (e: SdkError) => e.code === 'INVALID_TOKEN' && e.reason === 'bad-claim' && e.message.startsWith('roomId must be at most 128 characters'),
    );
    assert.throws(() => mintToken({ ...base, roomId: 'r', participantId: 'p'.repeat(200), grant: {} }), (e: SdkError) => e.reason === 'bad-claim');
    assert.doesNotThrow(() => mintToken({ ...base, roomId: 'r'.repeat(128), participantId: 'p'.repeat(128), grant: {} }));
  });

  it('parses lifetimes', () => {
    assert.equal(parseTtl(90), 90);
    assert.equal(parseTtl('90s'), 90);
    assert.equal(parseTtl('15m'), 900);
    assert.equal(parseTtl('1h'), 3600);
    assert.equal(parseTtl('2d'), 172800);
    assert.equal(parseTtl('45'), 45);
    for (const bad of [0, -1, Number.NaN, '', 'soon', '1w', '-5m']) assert.throws(() => parseTtl(bad), SdkError);
  });

  it('inputs that would mint a token the relay refuses, or throw something else than an SdkError, are refused as SdkErrors', () => {
    let n = 0;
    const refused = (options: unknown, code: string) => assert.throws(() => mintToken(options as never), (e: unknown) => e instanceof SdkError && e.code === code, `case ${++n}`);
    refused(undefined, 'INVALID_ARGUMENT');
    refused({ ...base, grant: {}, ttl: '9'.repeat(400) }, 'INVALID_ARGUMENT');
    refused({ ...base, grant: {}, ttl: true }, 'INVALID_ARGUMENT');
    refused({ ...base, grant: {}, ttl: {} }, 'INVALID_ARGUMENT');
    refused({ ...base, grant: {}, notBefore: Number.NaN }, 'INVALID_ARGUMENT');
    refused({ ...base, grant: {}, notBefore: Infinity }, 'INVALID_ARGUMENT');
    refused({ ...base, grant: {}, notBefore: '10' }, 'INVALID_ARGUMENT');
    refused({ ...base, grant: {}, now: 1e300 }, 'INVALID_ARGUMENT');
    refused({ ...base, grant: {}, ttl: 1e300 }, 'INVALID_ARGUMENT');
    refused({ ...base, grant: { extra: 10n } }, 'INVALID_TOKEN');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    refused({ ...base, grant: { extra: cyclic } }, 'INVALID_TOKEN');
    refused({ ...base, grant: {}, jti: 'j'.repeat(60_000) }, 'INVALID_TOKEN');
    // a fractional notBefore is minted, as before
    assert.ok(mintToken({ ...base, grant: {}, notBefore: 1.5, now: 1_000_000 }));
    // a long jti that fits is minted, and verified
    const token = mintToken({ ...base, grant: {}, jti: 'j'.repeat(4000), now: 1_000_000 });
    assert.ok(verifyToken(token, { keys, maxTtlRoom: 86400, maxTtlDomain: 3600, now: 1_000_000 }).ok);
  });
});

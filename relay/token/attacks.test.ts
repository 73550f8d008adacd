import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { KeyStore } from './keys.ts';
import { verifyToken } from './verify.ts';

/** Hostile tokens, each with the answer the relay must give (issue 7: at least 40 cases). */
const SECRET = 'attack-secret-0123456789';
const NOW = 1_800_000_000;
const keys = new KeyStore({ k1: SECRET });
const opts = { keys, maxTtlRoom: 86400, maxTtlDomain: 3600, now: NOW };

const b64 = (s: string) => Buffer.from(s).toString('base64url');
const json = (v: unknown) => JSON.stringify(v);
const hmac = (input: string, secret = SECRET) => createHmac('sha256', secret).update(input).digest('base64url');
/** Sign raw header and payload texts (so that duplicate keys and odd JSON survive). */
const signRaw = (header: string, payload: string, secret = SECRET) => {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${hmac(input, secret)}`;
};
const HS = json({ alg: 'HS256', typ: 'JWT' });
const base = { iss: 'k1', exp: NOW + 600, roomId: 'r', grant: { canPublish: true } };
const good = (over: Record<string, unknown> = {}) => signRaw(HS, json({ ...base, ...over }));
const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();

type Case = [name: string, token: () => unknown, code: string | 'OK', reason?: string];
const [h, p, s] = good().split('.') as [string, string, string];

const cases: Case[] = [
  ['a well-formed token (control)', () => good(), 'OK'],
  // algorithms
  ['alg none, empty signature (the usual form: its reason names the algorithm)', () => `${b64(json({ alg: 'none', typ: 'JWT' }))}.${p}.`, 'INVALID_TOKEN', 'unsupported-algorithm'],
  ['alg none, with a signature', () => `${b64(json({ alg: 'none' }))}.${p}.${s}`, 'INVALID_TOKEN', 'unsupported-algorithm'],
  ['alg NONE', () => signRaw(json({ alg: 'NONE' }), json(base)), 'INVALID_TOKEN', 'unsupported-algorithm'],
  ['alg HS384', () => signRaw(json({ alg: 'HS384' }), json(base)), 'INVALID_TOKEN', 'unsupported-algorithm'],
  ['alg HS512', () => signRaw(json({ alg: 'HS512' }), json(base)), 'INVALID_TOKEN', 'unsupported-algorithm'],
  ['alg RS256 signed with the secret', () => signRaw(json({ alg: 'RS256' }), json(base)), 'INVALID_TOKEN', 'unsupported-algorithm'],
  ['alg RS256 with a public key used as an HMAC secret', () => signRaw(json({ alg: 'RS256' }), json(base), pem), 'INVALID_TOKEN', 'unsupported-algorithm'],
  ['HS256 with a public key used as the HMAC secret', () => signRaw(HS, json(base), pem), 'INVALID_TOKEN', 'bad-signature'],
  ['alg missing', () => signRaw(json({ typ: 'JWT' }), json(base)), 'INVALID_TOKEN', 'unsupported-algorithm'],
  ['alg as a number', () => signRaw(json({ alg: 256 }), json(base)), 'INVALID_TOKEN', 'unsupported-algorithm'],
  ['alg as an array', () => signRaw(json({ alg: ['HS256'] }), json(base)), 'INVALID_TOKEN', 'unsupported-algorithm'],
  // header parameters
  ['kid pointing elsewhere (ignored: keys come from iss)', () => signRaw(json({ alg: 'HS256', kid: '../../etc/passwd' }), json(base)), 'OK'],
  ['jku to an attacker (ignored)', () => signRaw(json({ alg: 'HS256', jku: 'https://evil.example/jwks' }), json(base)), 'OK'],
  ['jwk embedded (ignored)', () => signRaw(json({ alg: 'HS256', jwk: { kty: 'oct', k: 'AAAA' } }), json(base)), 'OK'],
  ['crit header', () => signRaw(json({ alg: 'HS256', crit: ['b64'], b64: false }), json(base)), 'INVALID_TOKEN', 'unsupported-header'],
  ['duplicate alg keys, last one none', () => signRaw('{"alg":"HS256","alg":"none"}', json(base)), 'INVALID_TOKEN', 'unsupported-algorithm'],
  // signature tampering
  ['signature stripped', () => `${h}.${p}.`, 'INVALID_TOKEN', 'bad-signature'],
  ['signature truncated', () => `${h}.${p}.${s.slice(0, 40)}`, 'INVALID_TOKEN', 'bad-signature'],
  ['signature with = padding', () => `${h}.${p}.${s}=`, 'INVALID_TOKEN', 'malformed'],
  ['signature in standard base64 (+/)', () => `${h}.${p}.${Buffer.from(s, 'base64url').toString('base64')}`, 'INVALID_TOKEN', 'malformed'],
  ['payload in standard base64 with padding', () => `${h}.${Buffer.from(json(base)).toString('base64')}.${s}`, 'INVALID_TOKEN', 'malformed'],
  ['signature of another payload', () => `${h}.${b64(json({ ...base, grant: { canModerate: true } }))}.${s}`, 'INVALID_TOKEN', 'bad-signature'],
  ['signature doubled', () => `${h}.${p}.${s}${s}`, 'INVALID_TOKEN', 'bad-signature'],
  ['whitespace around the token', () => ` ${good()} `, 'INVALID_TOKEN', 'malformed'],
  ['four parts', () => `${good()}.${s}`, 'INVALID_TOKEN', 'malformed'],
  // claims with the wrong types or values
  ['exp as a string', () => good({ exp: String(NOW + 600) }), 'INVALID_TOKEN', 'malformed'],
  ['exp negative', () => good({ exp: -1 }), 'INVALID_TOKEN', 'expired'],
  ['exp "NaN"', () => good({ exp: 'NaN' }), 'INVALID_TOKEN', 'malformed'],
  ['exp huge (1e308)', () => good({ exp: 1e308 }), 'INVALID_TOKEN', 'lifetime-too-long'],
  ['exp overflowing to Infinity (1e400)', () => signRaw(HS, `{"iss":"k1","exp":1e400,"roomId":"r","grant":{}}`), 'INVALID_TOKEN', 'malformed'],
  ['nbf as a string', () => good({ nbf: 'now' }), 'INVALID_TOKEN', 'malformed'],
  ['nbf far in the future', () => good({ nbf: NOW + 1e9 }), 'INVALID_TOKEN', 'not-yet-valid'],
  ['iat as a string', () => good({ iat: 'yesterday' }), 'INVALID_TOKEN', 'bad-claim'],
  ['iat as an object', () => good({ iat: { t: 1 } }), 'INVALID_TOKEN', 'bad-claim'],
  ['grant as an array', () => good({ grant: [true] }), 'INVALID_TOKEN', 'bad-claim'],
  ['grant null', () => good({ grant: null }), 'INVALID_TOKEN', 'bad-claim'],
  ['grant flag as a string "true"', () => good({ grant: { canModerate: 'true' } }), 'INVALID_TOKEN', 'bad-claim'],
  ['isViewer as a number', () => good({ isViewer: 0 }), 'INVALID_TOKEN', 'bad-claim'],
  ['roomId as an array', () => good({ roomId: ['r'] }), 'INVALID_TOKEN', 'bad-claim'],
  ['duplicate grant keys: the signed bytes decide (last wins)', () => signRaw(HS, `{"iss":"k1","exp":${NOW + 600},"roomId":"r","grant":{"canPublish":true},"grant":[]}`), 'INVALID_TOKEN', 'bad-claim'],
  ['duplicate iss keys: last one unknown', () => signRaw(HS, `{"iss":"k1","iss":"k2","exp":${NOW + 600},"roomId":"r","grant":{}}`), 'INVALID_API_KEY', 'unknown-api-key'],
  ['__proto__ at the top cannot add a roomId', () => signRaw(HS, `{"iss":"k1","exp":${NOW + 600},"__proto__":{"roomId":"x"},"grant":{"canModerate":true}}`), 'INVALID_TOKEN', 'privileged-grant-needs-room'],
  ['__proto__ inside the grant cannot add a flag', () => signRaw(HS, `{"iss":"k1","exp":${NOW + 600},"roomId":"r","grant":{"__proto__":{"canModerate":true}}}`), 'OK'],
  ['constructor.prototype keys are plain data', () => good({ constructor: { prototype: { canModerate: true } } }), 'OK'],
  // issuer
  ['iss with a Cyrillic look-alike', () => signRaw(HS, json({ ...base, iss: 'к1' })), 'INVALID_API_KEY', 'unknown-api-key'],
  ['iss with a zero-width space', () => signRaw(HS, json({ ...base, iss: 'k\u200b1' })), 'INVALID_API_KEY', 'unknown-api-key'],
  ['iss with a trailing space', () => signRaw(HS, json({ ...base, iss: 'k1 ' })), 'INVALID_API_KEY', 'unknown-api-key'],
  ['iss as a number', () => good({ iss: 1 }), 'INVALID_TOKEN', 'missing-issuer'],
  ['iss null', () => good({ iss: null }), 'INVALID_TOKEN', 'missing-issuer'],
  // size and encoding
  ['a 1 MB token', () => `${h}.${'A'.repeat(1024 * 1024)}.${s}`, 'INVALID_TOKEN', 'malformed'],
  ['a 1 MB signed payload', () => good({ pad: 'x'.repeat(1024 * 1024) }), 'OK'],
  ['a payload that is not UTF-8 JSON', () => `${h}.${Buffer.from([0xff, 0xfe, 0x7b]).toString('base64url')}.${s}`, 'INVALID_TOKEN', 'malformed'],
  ['an empty header object', () => signRaw('{}', json(base)), 'INVALID_TOKEN', 'unsupported-algorithm'],
];

describe(`JWT attack suite (${cases.length} cases)`, () => {
  it('has at least 40 cases', () => assert.ok(cases.length >= 40));
  for (const [name, make, code, reason] of cases) {
    it(`${name}: ${code}${reason ? ` (${reason})` : ''}`, () => {
      const verdict = verifyToken(make(), opts);
      if (code === 'OK') {
        assert.equal(verdict.ok, true, JSON.stringify(verdict));
        if (verdict.ok) assert.equal(verdict.claims.grant.canModerate, undefined);
        return;
      }
      assert.equal(verdict.ok, false);
      if (!verdict.ok) {
        assert.equal(verdict.code, code);
        if (reason) assert.equal(verdict.reason, reason);
      }
    });
  }
  it('leaves Object.prototype alone', () => assert.equal(({} as Record<string, unknown>).canModerate, undefined));
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Message } from 'werift';
import { MAX_STUN_ATTRIBUTES, MAX_STUN_BYTES, stunShape } from './datagram-check.ts';
import { admits, type GuardedProtocol } from './ice-guard.ts';

/** A browser-like binding request, signed and fingerprinted, as werift builds one. */
function bindingRequest(username = 'abcd:wxyz'): Buffer {
  return new Message(1, 0)
    .setAttribute('USERNAME', username)
    .setAttribute('PRIORITY', 1853817087)
    .setAttribute('ICE-CONTROLLING', 5n)
    .setAttribute('USE-CANDIDATE', null)
    .addMessageIntegrity(Buffer.from('password-password-pass'))
    .addFingerprint().bytes;
}

/** A STUN header (binding request) over `attributes`, each a type and a value (padded). */
function stun(attributes: Array<[number, Buffer]>): Buffer {
  const body = Buffer.concat(attributes.map(([type, value]) => {
    const head = Buffer.alloc(4);
    head.writeUInt16BE(type, 0);
    head.writeUInt16BE(value.length, 2);
    return Buffer.concat([head, value, Buffer.alloc((4 - (value.length % 4)) % 4)]);
  }));
  const header = Buffer.alloc(20);
  header.writeUInt16BE(0x0001, 0);
  header.writeUInt16BE(body.length, 2);
  header.writeUInt32BE(0x2112a442, 4);
  return Buffer.concat([header, body]);
}

const FINGERPRINT = 0x8028;
const INTEGRITY = 0x0008;

describe('STUN datagrams are walked before werift parses them', () => {
  it("a browser's binding request (and one with the longest ufrags ICE allows) is STUN to parse", () => {
    assert.equal(stunShape(bindingRequest()), 'stun');
    assert.equal(stunShape(bindingRequest(`${'u'.repeat(256)}:${'v'.repeat(256)}`)), 'stun');
  });

  it('a datagram of 8,185 FINGERPRINTs (werift checked each over all before it: 670–770 ms a datagram, from anyone) is dropped unparsed, as are repeated or misplaced ones', () => {
    const many = stun(Array.from({ length: 8185 }, () => [FINGERPRINT, Buffer.alloc(4)] as [number, Buffer]));
    assert.equal(stunShape(many), 'drop');
    // admitted before: a socket not (yet) owned by an ICE-lite connection let werift parse anything
    assert.equal(admits({} as GuardedProtocol, many, ['192.0.2.1', 9]), false);
    assert.equal(stunShape(stun([[FINGERPRINT, Buffer.alloc(4)], [FINGERPRINT, Buffer.alloc(4)]])), 'drop', 'a FINGERPRINT not last');
    assert.equal(stunShape(stun([[INTEGRITY, Buffer.alloc(20)], [INTEGRITY, Buffer.alloc(20)]])), 'drop', 'two MESSAGE-INTEGRITY');
    assert.equal(stunShape(stun([[INTEGRITY, Buffer.alloc(20)], [0x0006, Buffer.from('user')]])), 'drop', 'an attribute after MESSAGE-INTEGRITY');
    assert.equal(stunShape(stun(Array.from({ length: MAX_STUN_ATTRIBUTES + 1 }, () => [0x0024, Buffer.alloc(4)] as [number, Buffer]))), 'drop', 'too many attributes');
    assert.equal(stunShape(stun([[0x0006, Buffer.alloc(MAX_STUN_BYTES)]])), 'drop', 'too large');
  });

  it('a datagram whose first byte is in DTLS\'s range (20–63) but which werift parses as STUN (its check: first two bits 0, the cookie, the length) is walked as STUN: 185 FINGERPRINTs in 1,500 bytes got past as DTLS', () => {
    const bomb = stun(Array.from({ length: 185 }, () => [FINGERPRINT, Buffer.alloc(4)] as [number, Buffer]));
    bomb[0] = 23;
    assert.equal(stunShape(bomb), 'drop');
    const request = bindingRequest();
    request[0] = 0x17 | (request[0]! & 0x03);
    assert.equal(stunShape(request), 'stun', 'walked as STUN, as werift will parse it');
  });

  it('a header whose length disagrees with the datagram, or an attribute running past it, is dropped; DTLS and RTP are not STUN', () => {
    const good = bindingRequest();
    const lying = Buffer.from(good);
    lying.writeUInt16BE(good.length, 2);
    assert.equal(stunShape(lying), 'drop');
    const past = stun([[0x0006, Buffer.from('user')]]);
    past.writeUInt16BE(400, 22);
    assert.equal(stunShape(past), 'drop');
    assert.equal(stunShape(Buffer.from([22, 254, 253, 0, 0])), 'other');
    assert.equal(stunShape(Buffer.from([0x80, 96, 0, 1])), 'other');
    assert.equal(stunShape(Buffer.from([0, 1, 0, 0])), 'drop', 'STUN-shaped, too short');
  });
});

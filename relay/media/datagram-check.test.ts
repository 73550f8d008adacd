import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DTLS_DATAGRAM_BURST, DTLS_DATAGRAM_RATE, dtlsDatagramRate, MAX_HANDSHAKE_BYTES, MAX_MEDIA_DATAGRAM, MAX_RTP_EXTENSION_WORDS, wellFormedMedia } from './datagram-check.ts';

/** An RTP header (version 2, payload type 96) with `csrcs` CSRCs and, if given, a one-byte-header extension of `words` words, then `payload` bytes. */
function rtp({ csrcs = 0, words, payload = 20 }: { csrcs?: number; words?: number; payload?: number }): Buffer {
  const ext = words === undefined ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0xbe, 0xde, words >> 8, words & 0xff]), Buffer.alloc(4 * words)]);
  const head = Buffer.alloc(12 + 4 * csrcs);
  head[0] = 0x80 | (words === undefined ? 0 : 0x10) | csrcs;
  head[1] = 96;
  return Buffer.concat([head, ext, Buffer.alloc(payload)]);
}

/** A DTLS 1.2 plaintext record (epoch 0) of handshake fragments. */
function handshakeRecord(fragments: Array<{ type?: number; length: number; offset?: number; body: number }>, epoch = 0): Buffer {
  const body = Buffer.concat(
    fragments.map((f) => {
      const h = Buffer.alloc(12);
      h[0] = f.type ?? 1;
      h.writeUIntBE(f.length, 1, 3);
      h.writeUIntBE(f.offset ?? 0, 6, 3);
      h.writeUIntBE(f.body, 9, 3);
      return Buffer.concat([h, Buffer.alloc(f.body)]);
    }),
  );
  const head = Buffer.from([22, 0xfe, 0xfd, epoch >> 8, epoch & 0xff, 0, 0, 0, 0, 0, 0, 0, 0]);
  head.writeUInt16BE(body.length, 11);
  return Buffer.concat([head, body]);
}

describe('media datagrams werift may read (issue 11)', () => {
  it('RTP whose header fits, with a browser-sized extension, passes', () => {
    assert.equal(wellFormedMedia(rtp({})), true);
    assert.equal(wellFormedMedia(rtp({ csrcs: 2, words: 3 })), true);
    assert.equal(wellFormedMedia(rtp({ words: MAX_RTP_EXTENSION_WORDS })), true);
  });

  it('a 32-byte RTP packet announcing a 65,535-word extension is dropped (werift read past its end, quadratically: 192 s)', () => {
    const bomb = Buffer.alloc(32);
    bomb.set([0x90, 96, 0, 1, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 0xbe, 0xde, 0xff, 0xff]);
    assert.equal(wellFormedMedia(bomb), false);
    assert.equal(wellFormedMedia(rtp({ words: MAX_RTP_EXTENSION_WORDS + 1 })), false, 'an extension larger than any browser sends');
    assert.equal(wellFormedMedia(rtp({ csrcs: 15, payload: 0 }).subarray(0, 40)), false, 'CSRCs past the end');
    assert.equal(wellFormedMedia(Buffer.from([0x80, 96, 0, 1])), false, 'shorter than a header');
    for (const second of [0xd1, 0xdf]) {
      // werift takes RTCP for 192–208 only: 209–223 (a marker bit and payload type 81–95) goes down its RTP path
      const marked = Buffer.from(bomb);
      marked[1] = second;
      assert.equal(wellFormedMedia(marked), false, `second byte ${second}: checked as the RTP werift reads it as`);
    }
  });

  it('datagrams larger than an MTU, and first bytes of nothing the relay speaks, are dropped', () => {
    assert.equal(wellFormedMedia(rtp({ payload: MAX_MEDIA_DATAGRAM })), false);
    assert.equal(wellFormedMedia(Buffer.from([0x40, 0, 0, 4, 1, 2, 3, 4])), false, 'a TURN channel');
    assert.equal(wellFormedMedia(Buffer.alloc(0)), false);
    assert.equal(wellFormedMedia(Buffer.from([0x81, 201, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0])), true, 'an RTCP header');
  });

  it('DTLS: a handshake whose fragments fit passes; one claiming 16 MiB, or running past its record, is dropped', () => {
    assert.equal(wellFormedMedia(handshakeRecord([{ length: 300, body: 300 }])), true);
    assert.equal(wellFormedMedia(handshakeRecord([{ length: 2000, offset: 1000, body: 500 }])), true, 'a fragment of a larger message');
    assert.equal(wellFormedMedia(handshakeRecord([{ length: 0xffffff, body: 1 }])), false, 'werift allocated what each fragment claims');
    assert.equal(wellFormedMedia(handshakeRecord([{ length: MAX_HANDSHAKE_BYTES + 1, body: 1 }])), false);
    assert.equal(wellFormedMedia(handshakeRecord([{ length: 100, offset: 90, body: 20 }])), false, 'past the message');
    assert.equal(wellFormedMedia(handshakeRecord(Array.from({ length: 9 }, (_, i) => ({ type: i + 1, length: 10, body: 1 })))), false, 'fragments of many types in one record');
    const truncated = handshakeRecord([{ length: 300, body: 300 }]);
    assert.equal(wellFormedMedia(truncated.subarray(0, truncated.length - 1)), false, 'a record longer than the datagram');
    assert.equal(wellFormedMedia(handshakeRecord([{ length: 0xffffff, body: 1 }], 1)), true, 'an encrypted record is opaque here');
    const empty = (type: number) => Buffer.from([type, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0]);
    assert.equal(wellFormedMedia(Buffer.concat(Array.from({ length: 8 }, () => empty(23)))), true, 'a flight of records');
    assert.equal(wellFormedMedia(Buffer.concat(Array.from({ length: 9 }, () => empty(23)))), false, 'a hundred records each failing decryption cost werift more than media');
    assert.equal(wellFormedMedia(empty(24)), false, 'no content type DTLS 1.2 does not have');
  });

  it(`a transport takes ${DTLS_DATAGRAM_RATE} DTLS datagrams a second, ${DTLS_DATAGRAM_BURST} at once`, () => {
    let now = 0;
    const rate = dtlsDatagramRate(() => now);
    let taken = 0;
    while (rate.take()) taken++;
    assert.equal(taken, DTLS_DATAGRAM_BURST);
    now += 100;
    taken = 0;
    while (rate.take()) taken++;
    assert.equal(taken, DTLS_DATAGRAM_RATE / 10);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { amfDecode, amfEncode, ChunkReader, MessageType, RTMP_LIMITS, RtmpProtocolError, writeChunks, type Amf, type RtmpMessage } from '../relay/outputs/rtmp-wire.ts';
import { isPublicAddress, parseRtmpUrl } from '../relay/outputs/rtmp-target.ts';
import { header0, setChunkSize } from './rtmp-listener.ts';

describe('RTMP readers and targets (units)', () => {
  const amfValue: fc.Arbitrary<Amf> = fc.letrec<{ v: Amf }>((tie) => ({
    v: fc.oneof({ depthSize: 'small' }, fc.double({ noNaN: true }), fc.boolean(), fc.string(), fc.constant(null), fc.array(tie('v'), { maxLength: 4 }), fc.dictionary(fc.string({ minLength: 1 }), tie('v'), { maxKeys: 4 })),
  })).v;

  it('item 3: the AMF0 and chunk readers are total: any bytes give values or RtmpProtocolError, memory stays bounded', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2048 }), (bytes) => {
        try {
          amfDecode(bytes);
        } catch (err) {
          assert.ok(err instanceof RtmpProtocolError, String(err));
        }
      }),
      { numRuns: 5000 },
    );
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 4096 }), { maxLength: 40 }), (pieces) => {
        const reader = new ChunkReader(() => {});
        try {
          for (const p of pieces) {
            reader.push(Buffer.from(p));
            assert.ok(reader.buffered <= RTMP_LIMITS.maxBufferedBytes);
          }
        } catch (err) {
          assert.ok(err instanceof RtmpProtocolError, String(err));
          assert.throws(() => reader.push(Buffer.alloc(1)), RtmpProtocolError, 'a broken reader stays broken');
        }
      }),
      { numRuns: 2000 },
    );
    // the limits, one by one
    const reader = () => new ChunkReader(() => {});
    assert.throws(() => reader().push(setChunkSize(0)), RtmpProtocolError);
    assert.throws(() => reader().push(setChunkSize(2 ** 31)), RtmpProtocolError);
    assert.throws(() => reader().push(header0(3, MessageType.Command, RTMP_LIMITS.maxMessageBytes + 1)), RtmpProtocolError);
    assert.throws(() => reader().push(Buffer.from([0xc5])), RtmpProtocolError);
    const many = reader();
    assert.throws(() => {
      for (let csid = 2; csid < 63; csid++) many.push(header0(csid, MessageType.Command, 60 * 1024));
    }, RtmpProtocolError, 'partial messages on many chunk streams hit the buffer budget');
    assert.throws(() => amfDecode(Buffer.concat([...Array.from({ length: 100 }, () => Buffer.from([0x0a, 0, 0, 0, 1])), Buffer.from([5])])), RtmpProtocolError);
    assert.throws(() => amfDecode(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff])), RtmpProtocolError);
    assert.throws(() => amfDecode(Buffer.from([0x0c, 0xff, 0xff, 0xff, 0xff])), RtmpProtocolError);
    assert.equal(Object.getPrototypeOf(amfDecode(Buffer.from([0x03, 0, 9, ...Buffer.from('__proto__'), 0x05, 0, 0, 9]))[0]), Object.prototype, 'a key "__proto__" is only a key');
  });

  it('item 3: what the writer writes the reader reads (any chunk size, extended timestamps, split anywhere)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ values: fc.array(amfValue, { maxLength: 4 }), timestamp: fc.oneof(fc.nat(0xfffffe), fc.integer({ min: 0xffffff, max: 2 ** 32 - 1 })), csid: fc.integer({ min: 2, max: 63 }) }), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: 1, max: 97 }),
        (messages, chunkSize, cut) => {
          const got: RtmpMessage[] = [];
          const reader = new ChunkReader((m) => got.push(m));
          reader.chunkSize = chunkSize;
          const bytes = Buffer.concat(messages.map((m) => writeChunks({ typeId: MessageType.Data, streamId: 1, timestamp: m.timestamp, payload: amfEncode(m.values) }, m.csid, chunkSize)));
          for (let o = 0; o < bytes.length; o += cut) reader.push(bytes.subarray(o, o + cut));
          assert.equal(got.length, messages.length);
          got.forEach((m, i) => {
            assert.equal(m.timestamp, messages[i]!.timestamp);
            assert.deepEqual(amfDecode(m.payload), amfDecode(amfEncode(messages[i]!.values)));
          });
        },
      ),
      { numRuns: 500 },
    );
  });

  it('item 21: which addresses are public', () => {
    for (const a of ['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '2001:4860::8888', '::ffff:8.8.8.8']) assert.ok(isPublicAddress(a), a);
    for (const a of [
      '127.0.0.1', '127.255.255.254', '10.0.0.1', '172.16.0.1', '172.31.255.255', '192.168.0.1', '100.64.0.1', '100.127.255.255', '169.254.169.254', '169.254.0.1',
      '0.0.0.0', '0.1.2.3', '224.0.0.1', '239.255.255.255', '255.255.255.255', '240.0.0.1', '::', '::1', 'fc00::1', 'fdff::1', 'fe80::1', 'febf::1', 'ff02::1',
      '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:a9fe:a9fe', '::127.0.0.1', '64:ff9b::a9fe:a9fe', '64:ff9b::10.1.1.1', '2002:a00:1::1', '2002:c0a8:101::',
      '::ffff:0:127.0.0.1', '::ffff:0:a9fe:a9fe', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '64:ff9b:1::a00:1', '192.88.99.1',
      'not an address', '',
    ]) assert.ok(!isPublicAddress(a), a);
  });

  it('item 21: livestream URLs: rtmp and rtmps, nothing else', () => {
    assert.deepEqual(parseRtmpUrl('rtmp://example.com/live/key'), { secure: false, host: 'example.com', port: 1935, app: 'live', key: 'key', tcUrl: 'rtmp://example.com/live' });
    assert.deepEqual(parseRtmpUrl('rtmps://example.com/a/b/key'), { secure: true, host: 'example.com', port: 443, app: 'a/b', key: 'key', tcUrl: 'rtmps://example.com/a/b' });
    assert.equal(parseRtmpUrl('rtmp://[2001:db8::1]:1936/live/key')?.host, '2001:db8::1');
    for (const bad of ['http://example.com/live/key', 'rtmp://example.com/key', 'rtmp://user@example.com/live/key', 'rtmp://example.com:0/live/key', 'rtmp://example.com:70000/live/key',
      'rtmp://[nothost]/live/key', 'rtmp://exa mple.com/live/key', 'rtmp://example.com/live/key?x=1', 'rtmp://example.com/live/k\nlog', `rtmp://example.com/${'a'.repeat(3000)}/key`]) {
      assert.equal(parseRtmpUrl(bad), null, bad);
    }
  });
});

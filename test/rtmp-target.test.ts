import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isPublicAddress, parseRtmpUrl } from '../relay/outputs/rtmp-target.ts';

describe('livestream targets (units)', () => {
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

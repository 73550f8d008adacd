import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DownloadPool, shareKey } from './send-file.ts';

describe('downloads: pools and shares', () => {
  it('a share is an IPv4 address, or an IPv6 /64 whatever its spelling; a cluster peer has none of its own', () => {
    assert.equal(shareKey('203.0.113.7', false), '203.0.113.7');
    assert.equal(shareKey('::ffff:203.0.113.7', false), '203.0.113.7');
    assert.equal(shareKey('2001:db8:1:2:3:4:5:6', false), '2001:db8:1:2::/64');
    assert.equal(shareKey('2001:db8:1:2::9', false), '2001:db8:1:2::/64');
    assert.equal(shareKey('2001:0DB8:0001:0002:aaaa::1', false), '2001:db8:1:2::/64');
    assert.equal(shareKey('2001:db8::1', false), '2001:db8:0:0::/64');
    assert.equal(shareKey('::1', false), '0:0:0:0::/64');
    assert.equal(shareKey('203.0.113.7', true), null);
    assert.equal(shareKey(undefined, false), '');
  });

  it('a pool holds its places in all and per share, and gives them back; a share of 0 is no share', () => {
    const pool = new DownloadPool(3, 2);
    assert.ok(pool.take('a'));
    assert.ok(pool.take('a'));
    assert.equal(pool.take('a'), false, 'the share');
    assert.ok(pool.take('b'));
    assert.equal(pool.take('c'), false, 'the pool');
    pool.give('a');
    assert.ok(pool.take('c'));
    const open = new DownloadPool(2, 0);
    assert.ok(open.take('a') && open.take('a'));
    assert.equal(open.take('a'), false);
  });

  it('a group (a room\'s recordings) has its own share, whatever the addresses', () => {
    const pool = new DownloadPool(4, 0, 2);
    assert.ok(pool.take('a', 'room1'));
    assert.ok(pool.take('b', 'room1'));
    assert.equal(pool.take('c', 'room1'), false, 'the room\'s share');
    assert.ok(pool.take('c', 'room2'));
    assert.ok(pool.take('c'), 'no group: no group share');
    assert.equal(pool.take('d', 'room3'), false, 'the pool');
    pool.give('a', 'room1');
    assert.ok(pool.take('d', 'room1'));
  });
});

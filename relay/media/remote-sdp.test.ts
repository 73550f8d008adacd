import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_REMOTE_CANDIDATES, remoteSdp } from './remote-sdp.ts';

const HEAD = ['v=0', 'o=- 1 1 IN IP4 0.0.0.0', 's=-', 't=0 0', 'm=video 9 UDP/TLS/RTP/SAVPF 96', 'c=IN IP4 0.0.0.0', 'a=mid:0'];
const sdp = (lines: string[]) => [...HEAD, ...lines, ''].join('\r\n');
const candidate = (address: string, transport = 'udp', n = 1) => `a=candidate:${n} 1 ${transport} 2122260223 ${address} ${50000 + n} typ host generation 0`;

describe('remoteSdp: what of a member\'s SDP reaches werift', () => {
  it('keeps UDP candidates of IP literals, and every other line as it was', () => {
    const given = sdp([candidate('192.0.2.7'), candidate('2001:db8::1'), 'a=end-of-candidates', 'a=rtcp-mux']);
    assert.equal(remoteSdp(given), given);
  });

  it('drops names (an mDNS lookup, .local or not), TCP candidates, and anything past the first 16', () => {
    const names = ['3f1a0c2e-5b7d-4c1e-9f3a-1d2b3c4d5e6f.local', 'x.local', 'host.example', 'a.LOCAL', '.local.'];
    const many = Array.from({ length: 40 }, (_, i) => candidate(`10.0.0.${i + 1}`, 'udp', i));
    const out = remoteSdp(sdp([...names.map((n) => candidate(n)), candidate('192.0.2.9', 'tcp'), ...many]));
    const kept = out.split('\r\n').filter((l) => l.startsWith('a=candidate:'));
    assert.equal(kept.length, MAX_REMOTE_CANDIDATES);
    assert.deepEqual(kept, many.slice(0, MAX_REMOTE_CANDIDATES));
    assert.ok(out.startsWith(HEAD.join('\r\n')));
    assert.ok(out.endsWith('\r\n'));
  });

  it('a 960-candidate answer of names reaches werift with none of them', () => {
    const big = sdp(Array.from({ length: 960 }, (_, i) => candidate(`x${i}.local`, 'udp', i)));
    const out = remoteSdp(big);
    assert.equal(out.split('\r\n').filter((l) => l.startsWith('a=candidate:')).length, 0);
  });
});

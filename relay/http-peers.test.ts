import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { fromPeer, PEER_HEADER, peerProof } from './http-peers.ts';

const request = (method: string, url: string, header?: string) => ({ method, url, headers: header === undefined ? {} : { [PEER_HEADER]: header } }) as unknown as IncomingMessage;

describe('requests passed between nodes', () => {
  const key = Buffer.alloc(32, 7);
  const now = 1_800_000_000_000;
  const path = '/hls/abababababababababababababababab/seg0.ts';

  it('a proof made with the cluster key for this method and target passes; anything else is no proof', () => {
    const proof = peerProof(key, 'GET', path, now);
    assert.equal(fromPeer(request('GET', path, proof), key, now), true);
    assert.equal(fromPeer(request('GET', path, proof), key, now + 59_000), true, 'a minute of clocks and travel');
    assert.equal(fromPeer(request('GET', path, proof), key, now + 61_000), false, 'too old');
    assert.equal(fromPeer(request('GET', path, proof), Buffer.alloc(32, 8), now), false, 'another key');
    assert.equal(fromPeer(request('HEAD', path, proof), key, now), false, 'another method');
    assert.equal(fromPeer(request('GET', `${path}?x`, proof), key, now), false, 'another target');
    assert.equal(fromPeer(request('GET', path, proof), null, now), false, 'no key read yet');
    for (const forged of ['1', '', '.', `${now}.`, `x.${proof.split('.')[1]}`, `${now}.${'A'.repeat(43)}`, `${proof}x`, '9'.repeat(200)]) {
      assert.equal(fromPeer(request('GET', path, forged), key, now), false, forged.slice(0, 20));
    }
    assert.equal(fromPeer(request('GET', path), key, now), false, 'no header');
  });
});

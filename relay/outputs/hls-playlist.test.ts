import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { h264Codec, LivePlaylist, masterPlaylist, windowOf } from './hls-playlist.ts';

describe('HLS playlists', () => {
  it('a sliding window: sequence numbers, discontinuities counted as they leave, files deleted a window after', () => {
    const p = new LivePlaylist(2, 3);
    const deleted: number[] = [];
    for (let i = 0; i < 4; i++) deleted.push(...p.add(2).deletable);
    p.discontinuity();
    for (let i = 0; i < 2; i++) deleted.push(...p.add(2).deletable);
    let text = p.playlist((n) => `seg${n}.ts`);
    assert.match(text, /#EXT-X-MEDIA-SEQUENCE:3\n#EXT-X-DISCONTINUITY-SEQUENCE:0\n#EXTINF:2.000,\nseg3.ts\n#EXT-X-DISCONTINUITY\n#EXTINF:2.000,\nseg4.ts\n#EXTINF:2.000,\nseg5.ts\n$/);
    for (let i = 0; i < 3; i++) deleted.push(...p.add(2).deletable);
    p.ended = true;
    text = p.playlist((n) => `seg${n}.ts`);
    assert.match(text, /#EXT-X-MEDIA-SEQUENCE:6\n#EXT-X-DISCONTINUITY-SEQUENCE:1\n/);
    assert.doesNotMatch(text, /#EXT-X-DISCONTINUITY\n/);
    assert.match(text, /#EXT-X-ENDLIST\n$/);
    assert.deepEqual(deleted, [0, 1], 'a segment that left the playlist (0 at 3) is deleted more than a window later (at 7)');
    assert.equal(p.total, 18);
  });

  it('the first run is no discontinuity; the target duration covers the longest segment', () => {
    const p = new LivePlaylist(2);
    p.discontinuity();
    p.add(2.6);
    const text = p.playlist((n) => `seg${n}.ts`);
    assert.doesNotMatch(text, /DISCONTINUITY\n/);
    assert.match(text, /#EXT-X-TARGETDURATION:3\n/);
    assert.equal(windowOf(2), 30);
    assert.equal(windowOf(30), 6);
  });

  it('the master playlist names the variant and the subtitles', () => {
    const { codecs, level } = h264Codec(1280, 720, 25);
    assert.equal(codecs, 'avc1.640028,mp4a.40.2');
    assert.equal(level, '4.0');
    assert.equal(h264Codec(1920, 1080, 60).level, '4.2');
    const text = masterPlaylist({ width: 1280, height: 720, fps: 25, bandwidth: 2_673_000, codecs });
    assert.match(text, /TYPE=SUBTITLES,GROUP-ID="stage".*URI="subs.m3u8"/);
    assert.match(text, /#EXT-X-STREAM-INF:BANDWIDTH=2673000,CODECS="avc1.640028,mp4a.40.2",RESOLUTION=1280x720,FRAME-RATE=25.000,SUBTITLES="stage"\nmedia.m3u8\n/);
  });
});

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseCli } from './cli-flags.ts';
import { checkStorageDirs } from './config.ts';
import { HEAP_GROWTH_FLAG, setHeapGrowth } from './heap-growth.ts';

describe('relay flags of the media outputs', () => {
  it('--composite reads WIDTHxHEIGHT[@FPS] and derives the bitrate; absurd sizes are refused', () => {
    assert.deepEqual(parseCli([], {}).composite, { width: 1280, height: 720, fps: 25, videoKbps: 2300 });
    assert.deepEqual(parseCli(['--composite', '640x360'], {}).composite, { width: 640, height: 360, fps: 25, videoKbps: 600 });
    assert.deepEqual(parseCli([], { TESSERA_COMPOSITE: '1920x1080@30' }).composite, { width: 1920, height: 1080, fps: 30, videoKbps: 6200 });
    for (const bad of ['640x361', '99999x99999', '4000x2000', '640x360@0', '640x360@100', '640*360', '', 'x', '100x50']) {
      assert.throws(() => parseCli(['--composite', bad], {}), /--composite/, bad);
    }
  });

  it('--ffmpeg names the binary (a path or a name on PATH)', () => {
    assert.equal(parseCli([], {}).ffmpeg, 'ffmpeg');
    assert.equal(parseCli(['--ffmpeg', '/opt/ffmpeg/bin/ffmpeg'], {}).ffmpeg, '/opt/ffmpeg/bin/ffmpeg');
  });
});

describe('relay flags of the storage directories', () => {
  it('--recordings-dir and --hls-dir must be apart: the same directory, or one inside the other, is refused', () => {
    assert.doesNotThrow(() => parseCli(['--recordings-dir', '/srv/t/recordings', '--hls-dir', '/srv/t/hls'], {}));
    assert.doesNotThrow(() => parseCli(['--recordings-dir', '/srv/t/rec', '--hls-dir', '/srv/t/recordings'], {}), 'a shared prefix of names is not nesting');
    for (const [recordings, hls] of [['/srv/t', '/srv/t'], ['/srv/t/', '/srv/t/./'], ['/srv/t/hls/recordings', '/srv/t/hls'], ['/srv/t', '/srv/t/hls'], ['/srv/t/a/../hls', '/srv/t/hls']]) {
      assert.throws(() => parseCli(['--recordings-dir', recordings!, '--hls-dir', hls!], {}), /must be apart/, `${recordings} ${hls}`);
      assert.throws(() => checkStorageDirs({ recordingsDir: recordings!, hlsDir: hls! }), /must be apart/);
    }
    assert.throws(() => parseCli([], { TESSERA_RECORDINGS_DIR: '/srv/x', TESSERA_HLS_DIR: '/srv/x/hls' }), /must be apart/);
    // a child whose name starts with two dots is inside, not above (found by review)
    for (const child of ['/srv/t/..hls', '/srv/t/...']) assert.throws(() => checkStorageDirs({ recordingsDir: '/srv/t', hlsDir: child }), /must be apart/, child);
    assert.doesNotThrow(() => checkStorageDirs({ recordingsDir: '/srv/t/a', hlsDir: '/srv/t/..a' }));
    // through a link: compared where the directories really are
    const dir = mkdtempSync(join(tmpdir(), 'tessera-dirs-'));
    try {
      mkdirSync(join(dir, 'real'));
      symlinkSync(join(dir, 'real'), join(dir, 'link'));
      assert.throws(() => checkStorageDirs({ recordingsDir: join(dir, 'real', 'rec'), hlsDir: join(dir, 'link', 'rec', 'hls') }), /must be apart/);
      assert.doesNotThrow(() => checkStorageDirs({ recordingsDir: join(dir, 'real', 'rec'), hlsDir: join(dir, 'link', 'hls') }));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('relay flags of a cluster node', () => {
  it('--node-url is an http(s) origin; paths, queries, credentials and other schemes are refused', () => {
    assert.equal(parseCli([], {}).nodeUrl, undefined);
    assert.equal(parseCli(['--node-url', 'http://10.0.0.5:7880'], {}).nodeUrl, 'http://10.0.0.5:7880');
    assert.equal(parseCli([], { TESSERA_NODE_URL: 'https://relay-2.internal:443/' }).nodeUrl, 'https://relay-2.internal');
    for (const bad of ['10.0.0.5:7880', 'ftp://x', 'http://a/b', 'http://a/?q', 'http://u:p@a', 'http://a#x', '']) {
      assert.throws(() => parseCli(['--node-url', bad], {}), /--node-url/, bad);
    }
  });
});

describe('--heap-growth: the headroom the command gives V8\'s old generation', () => {
  it('defaults to 300 %, reads a whole percent from 0 to 1000, refuses the rest', () => {
    assert.equal(parseCli([], {}).heapGrowthPercent, 300);
    assert.equal(parseCli(['--heap-growth', '0'], {}).heapGrowthPercent, 0);
    assert.equal(parseCli([], { TESSERA_HEAP_GROWTH: '150' }).heapGrowthPercent, 150);
    for (const bad of ['-1', '301', '2.5', 'lots', '']) assert.throws(() => parseCli(['--heap-growth', bad], {}), /--heap-growth/, bad);
    assert.equal(parseCli([], { TESSERA_HEAP_GROWTH: ' ' }).heapGrowthPercent, 300, 'a blank variable is unset');
  });

  it('an empty value of a numeric flag is refused, not read as 0 (--port "" is not a random port)', () => {
    assert.throws(() => parseCli(['--port', ''], {}), /--port/);
    assert.throws(() => parseCli(['--max-frame', ' '], {}), /--max-frame/);
  });

  it('setHeapGrowth refuses what V8 would misread, and keeps an operator\'s own flag', () => {
    for (const bad of [-1, 301, 2.5, Number.NaN]) assert.throws(() => setHeapGrowth(bad), RangeError, String(bad));
    assert.equal(setHeapGrowth(0), false, '0 leaves V8 alone');
    assert.equal(setHeapGrowth(300, ['--heap-growing-percent=50'], ''), false, 'node --heap-growing-percent=50 is kept');
    assert.equal(setHeapGrowth(300, [], '--max-old-space-size=4096 --heap-growing-percent=50'), false, 'so is NODE_OPTIONS');
  });

  it('the V8 flag it sets exists in this Node (an unknown flag would only be printed, not refused)', () => {
    const options = execFileSync(process.execPath, ['--v8-options'], { encoding: 'utf8' });
    assert.ok(options.includes(HEAP_GROWTH_FLAG), `${HEAP_GROWTH_FLAG} in node --v8-options`);
  });
});

import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { OutputChange } from '../src/protocol/control.ts';
import type { Room } from '../src/room.ts';
import { findExecutable, runningFfmpeg } from '../relay/outputs/ffmpeg/process.ts';
import { rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { nodePlatform } from './media-helpers.ts';
import { unrefLibraryDelays } from './media-fixtures.ts';
import { realTrack, type RealTrack } from './real-media.ts';

const FFMPEG = findExecutable('ffmpeg');
const run = promisify(execFile);

type Probe = { streams: Array<{ codec_name: string; codec_type: string }>; format: { duration?: string } };
/** ffprobe, asynchronously: the relay it may read from runs in this process. */
const probe = async (input: string): Promise<Probe> =>
  JSON.parse((await run('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name,codec_type:format=duration', '-of', 'json', input], { timeout: 60_000 })).stdout) as Probe;
const codecs = (p: Probe) => p.streams.map((s) => s.codec_name).sort();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The composite ffmpeg processes this test process's relay runs (children of this process, by pid). */
function compositePids(): number[] {
  const out = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)]).toString();
  return out
    .split('\n')
    .filter((l) => l.includes('-filter_complex'))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

describe('recording and HLS carry the stage composite (issue 13)', { skip: FFMPEG ? false : 'ffmpeg is not installed', timeout: 300_000 }, () => {
  let t: TestRelay;
  let http: string;
  const dir = mkdtempSync(join(tmpdir(), 'tessera-recording-hls-'));
  const senders: RealTrack[] = [];
  const grant = { canPublish: true, canSubscribe: true, canRecord: true, canHls: true };

  before(async () => {
    unrefLibraryDelays();
    t = await startTestRelay({ composite: { width: 640, height: 360, fps: 15, videoKbps: 600 } });
    http = t.url.replace('ws:', 'http:');
  });
  after(async () => {
    for (const s of senders) s.stop();
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const real = async (kind: 'video' | 'audio') => {
    const media = await realTrack(kind);
    senders.push(media);
    return media;
  };
  const join_ = (roomId: string, id: string, name: string) => t.join({ token: t.token({ roomId, participantId: id, grant }), name, media: nodePlatform });
  const publishBoth = async (room: Room) => {
    await room.localParticipant.publish('camera', (await real('video')).track);
    await room.localParticipant.publish('microphone', (await real('audio')).track);
  };

  it('recording: one MP4 (H.264 + AAC) as long as the time recorded across a stage change, listed in info at stop, downloadable', async (tc) => {
    const ada = await join_('rec', 'ada', 'Ada');
    await publishBoth(ada);
    const stopped = new Promise<OutputChange>((resolve) => ada.on('output-changed', (c) => c.output === 'recording' && c.state === 'stopped' && resolve(c)));
    // the time recorded, as the user sees it: from the call to start to the call to stop
    const from = Date.now();
    const started = await ada.recording.start();
    assert.equal(started.state, 'active');
    await sleep(6000);
    // a second speaker: the composite restarts with her
    const bo = await join_('rec', 'bo', 'Bo');
    await bo.localParticipant.publish('camera', (await real('video')).track);
    await sleep(8000);
    const stopCalled = Date.now();
    const status = await ada.recording.stop();
    const recorded = (stopCalled - from) / 1000;

    const files = status.info?.files ?? [];
    assert.deepEqual(files.map((f) => f.name).sort(), ['ada--camera.webm', 'ada--microphone.webm', 'bo--camera.webm', 'composite.mp4', 'timeline.jsonl']);
    assert.deepEqual((await stopped).info, status.info, 'output-changed for stopped carries the files');
    assert.deepEqual(ada.recording.info, status.info, "the SDK's status keeps them");
    const composite = files.find((f) => f.kind === 'composite')!;
    assert.equal(composite.url, `/recordings/${started.info!.recording}/composite.mp4`);
    assert.ok(files.every((f) => f.size > 0 && f.url === `/recordings/${started.info!.recording}/${f.name}`));

    const auth = { authorization: `Bearer ${t.token({ roomId: 'rec', grant: { canRecord: true } })}` };
    const res = await fetch(`${http}${composite.url}`, { headers: auth });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'video/mp4');
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.equal(bytes.length, composite.size);
    assert.equal(bytes.subarray(4, 8).toString('latin1'), 'ftyp');
    assert.ok(bytes.indexOf('moov') < bytes.indexOf('mdat'), '+faststart: the index comes first');
    const file = join(dir, 'composite.mp4');
    writeFileSync(file, bytes);
    const p = await probe(file);
    assert.deepEqual(codecs(p), ['aac', 'h264']);
    const duration = Number(p.format.duration);
    assert.ok(Math.abs(duration - recorded) <= recorded * 0.1, `the MP4 lasts ${duration} s for ${recorded} s recorded`);
    tc.diagnostic(`composite.mp4: ${duration} s for ${recorded} s recorded`);
    // each track's own file: the relay writes werift's WebM, its duration patched in at the end
    for (const [name, codec] of [['ada--camera.webm', 'vp8'], ['ada--microphone.webm', 'opus'], ['bo--camera.webm', 'vp8']] as const) {
      const trackFile = join(dir, name);
      writeFileSync(trackFile, Buffer.from(await (await fetch(`${http}/recordings/${started.info!.recording}/${name}`, { headers: auth })).arrayBuffer()));
      const t = await probe(trackFile);
      assert.deepEqual(codecs(t), [codec], name);
      assert.ok(Number(t.format.duration) > 1, `${name} lasts ${t.format.duration} s`);
    }
    const listed = (await (await fetch(`${http}/recordings`, { headers: auth })).json()) as { recordings: Array<{ file: string }> };
    assert.ok(listed.recordings.some((r) => r.file === 'composite.mp4'));
    const unauthorised = await fetch(`${http}${composite.url}`, { headers: { authorization: `Bearer ${t.token({ roomId: 'other', grant: { canRecord: true } })}` } });
    assert.equal(unauthorised.status, 404, "another room's token finds nothing");
    await Promise.all([ada.leave(), bo.leave()]);
  });

  it('hls: a live master playlist (H.264 + AAC, WebVTT subtitles), a discontinuity at a stage change, ENDLIST at stop', async (tc) => {
    const ada = await join_('live', 'ada', 'Ada');
    await publishBoth(ada);
    const status = await ada.hls.start({ segmentSeconds: 1 });
    const master = `${http}${status.info!.playlist}`;
    const base = master.replace(/index\.m3u8$/, '');
    const text = async (name: string) => (await fetch(`${base}${name}`)).text();
    const masterText = await (await fetch(master)).text();
    assert.match(masterText, /#EXT-X-MEDIA:TYPE=SUBTITLES,.*URI="subs\.m3u8"/);
    assert.match(masterText, /#EXT-X-STREAM-INF:.*CODECS="avc1\.[0-9a-f]{6},mp4a\.40\.2".*SUBTITLES="stage"\nmedia\.m3u8/);
    assert.match(await text('media.m3u8'), /^seg0\.ts$/m, 'active once the first segment is listed');
    // live, over HTTP
    assert.deepEqual(codecs(await probe(master)), ['aac', 'h264']);

    // a discontinuity of a run begun after Bo came: an earlier one (Ada's microphone joining the
    // composite after its first run) may still be listed, and stopping on it lost Bo's cue
    const before = Math.max(-1, ...[...(await text('media.m3u8')).matchAll(/^seg(\d+)\.ts$/gm)].map((m) => Number(m[1])));
    const bo = await join_('live', 'bo', 'Bo');
    await bo.localParticipant.publish('camera', (await real('video')).track);
    const runsAfter = async () => [...(await text('media.m3u8')).matchAll(/#EXT-X-DISCONTINUITY\n#EXTINF:[^\n]*\nseg(\d+)\.ts/g)].filter((m) => Number(m[1]) > before);
    await until(async () => (await runsAfter()).length > 0, 30_000, 'a discontinuity after the stage change');
    const live = await text('media.m3u8');
    assert.doesNotMatch(live, /#EXT-X-ENDLIST/);
    const numbers = [...live.matchAll(/^seg(\d+)\.ts$/gm)].map((m) => Number(m[1]));
    assert.deepEqual(numbers, numbers.map((_, i) => numbers[0]! + i), 'one numbering across runs');
    assert.deepEqual(codecs(await probe(`${base}seg${numbers.at(-1)}.ts`)), ['aac', 'h264']);
    await ada.hls.stop();

    const media = await text('media.m3u8');
    tc.diagnostic(`segments: ${[...media.matchAll(/^#EXTINF:([0-9.]+),$/gm)].map((m) => m[1]).join(' ')}`);
    const subs = await text('subs.m3u8');
    assert.match(media, /#EXT-X-ENDLIST\n$/);
    assert.match(subs, /#EXT-X-ENDLIST\n$/);
    assert.deepEqual(
      [...subs.matchAll(/^#EXTINF:.*$|^#EXT-X-DISCONTINUITY$/gm)].map((m) => m[0]),
      [...media.matchAll(/^#EXTINF:.*$|^#EXT-X-DISCONTINUITY$/gm)].map((m) => m[0]),
      'the subtitles follow the media segment by segment',
    );
    const cues = await Promise.all([...subs.matchAll(/^(sub\d+\.vtt)$/gm)].map((m) => text(m[1]!)));
    assert.ok(cues.every((c) => c.startsWith('WEBVTT\n')));
    assert.ok(cues.some((c) => c.includes('Bo joined the stage')), 'a stage event as a cue');
    assert.equal((await fetch(`${base}run-0.csv`)).status, 404, 'only the playlists and segments are served');
    assert.equal((await fetch(`${base}..%2Findex.m3u8`)).status, 404);
    await Promise.all([ada.leave(), bo.leave()]);
  });

  it('a room with no media still records and streams: the room card and silence', async () => {
    const quiet = await join_('quiet', 'host', 'Host');
    const hls = await quiet.hls.start({ segmentSeconds: 1 });
    await quiet.recording.start();
    assert.deepEqual(codecs(await probe(`${http}${hls.info!.playlist}`)), ['aac', 'h264']);
    await sleep(2000);
    const [recording] = await Promise.all([quiet.recording.stop(), quiet.hls.stop()]);
    assert.ok(recording.info?.files?.some((f) => f.name === 'composite.mp4' && f.size > 0));
    await quiet.leave();
  });

  it('ffmpeg killed: the output fails with ffmpeg-failed and ffmpeg\'s words', async () => {
    const host = await join_('killed', 'host', 'Host');
    await publishBoth(host);
    const failed = new Promise<OutputChange>((resolve) => host.on('output-changed', (c) => c.output === 'recording' && c.state === 'failed' && resolve(c)));
    await host.recording.start();
    assert.equal(compositePids().length, 1, 'one composite runs');
    // a run the composite is replacing at that moment (a track that arrived just now restarts it)
    // ends as meant, whatever kills it: the run that follows is killed in turn, until one fails
    let change: OutputChange | undefined;
    for (let attempt = 0; attempt < 10 && !change; attempt++) {
      for (const pid of compositePids()) process.kill(pid, 'SIGKILL');
      change = await Promise.race([failed, new Promise<undefined>((r) => setTimeout(r, 2000))]);
    }
    assert.ok(change, 'the recording failed');
    assert.equal(change.error?.reason, 'ffmpeg-failed');
    assert.match(change.error?.message ?? '', /ffmpeg ended \(killed by SIGKILL\)/);
    assert.equal(host.recording.state, 'failed');
    await host.leave();
  });

  it('no orphans: closing the relay leaves no ffmpeg', async () => {
    const host = await join_('closing', 'host', 'Host');
    await publishBoth(host);
    await host.recording.start();
    await host.hls.start();
    assert.ok(runningFfmpeg() >= 2);
    await t.relay.close();
    assert.equal(runningFfmpeg(), 0);
    assert.deepEqual(compositePids(), []);
  });
});

describe('ffmpeg missing (--ffmpeg /nonexistent)', () => {
  it('recording and HLS fail with ffmpeg-missing', async () => {
    const t = await startTestRelay({ ffmpeg: '/nonexistent/ffmpeg' });
    try {
      const host = await t.join({ token: t.token({ roomId: 'r', grant: { canRecord: true, canHls: true } }) });
      for (const output of ['recording', 'hls'] as const) {
        const err = await rejectsWith(host[output].start(), 'INTERNAL_ERROR');
        assert.equal(err.reason, 'ffmpeg-missing');
        assert.equal(host[output].state, 'failed');
        assert.equal(host[output].status.error?.reason, 'ffmpeg-missing');
      }
      await host.leave();
    } finally {
      await t.close();
    }
  });
});

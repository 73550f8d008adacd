import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { compositeGraph, encoderArgs } from '../relay/outputs/ffmpeg/composite.ts';
import { FfmpegProcess, findExecutable } from '../relay/outputs/ffmpeg/process.ts';
import { feedSdp, freeRtpPorts, RtpFeed, type FeedTrack } from '../relay/outputs/ffmpeg/rtp-feed.ts';
import type { TappedTrack } from '../relay/media/board.ts';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { nodePlatform } from './media-helpers.ts';
import { realTrack } from './real-media.ts';
import { unrefLibraryDelays } from './media-fixtures.ts';

const FFMPEG = findExecutable('ffmpeg');
const FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf';

/**
 * A publisher's real VP8 and Opus (made by ffmpeg, written into a werift track of the SDK in
 * Node) go through the relay's SFU; the relay's tap feeds them to an ffmpeg composite over
 * loopback RTP; the MP4 it writes is H.264 + AAC and shows the publisher's video.
 */
describe('the relay feeds forwarded tracks to ffmpeg (issue 13)', { skip: FFMPEG ? false : 'ffmpeg is not installed', timeout: 90_000 }, () => {
  let t: TestRelay;
  const dir = mkdtempSync(join(tmpdir(), 'tessera-feed-'));
  const stops: Array<() => void> = [];
  before(async () => {
    unrefLibraryDelays();
    t = await startTestRelay();
  });
  after(async () => {
    for (const stop of stops) stop();
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const real = async (kind: 'video' | 'audio') => {
    const media = await realTrack(kind);
    stops.push(media.stop);
    return media.track;
  };

  it('camera and microphone of a publisher, composited: H.264 + AAC, the video in the picture', async () => {
    const room = await t.join({ token: t.token({ roomId: 'feed', participantId: 'ada', grant: { canPublish: true, canSubscribe: true } }), media: nodePlatform });
    await room.localParticipant.publish('camera', await real('video'));
    await room.localParticipant.publish('microphone', await real('audio'));
    const media = t.relay.context.rooms.get('default', 'feed')!.media;
    const tapped: TappedTrack[] = [];
    const untap = media.tap((track) => void tapped.push(track));
    await until(() => tapped.length === 2, 10_000, 'both tracks tapped');
    const ordered: FeedTrack[] = [...tapped].sort((a, b) => (a.kind === b.kind ? 0 : a.kind === 'video' ? -1 : 1));
    const ports = await freeRtpPorts(ordered.length);
    const sdp = join(dir, 'room.sdp');
    writeFileSync(sdp, feedSdp(ordered.map((track, i) => ({ kind: track.kind, port: ports[i]! }))));
    const label = join(dir, 'ada.txt');
    writeFileSync(label, 'Ada');
    const roomCard = join(dir, 'room.txt');
    writeFileSync(roomCard, 'feed');
    const graph = compositeGraph({ width: 640, height: 360, fps: 15, labels: [label], audios: 1, roomCard, font: existsSync(FONT) ? FONT : null });
    const out = join(dir, 'out.mp4');
    const ffmpeg = await FfmpegProcess.start({
      ffmpeg: 'ffmpeg',
      args: ['-loglevel', 'error', '-protocol_whitelist', 'file,udp,rtp', '-use_wallclock_as_timestamps', '1', '-i', sdp, '-filter_complex', graph.filter, '-map', graph.video, '-map', graph.audio, ...encoderArgs(15, 800), '-t', '4', '-y', out],
    });
    await new Promise((r) => setTimeout(r, 300));
    const feed = new RtpFeed(ordered.map((track, i) => ({ track, port: ports[i]! })));
    const exit = await ffmpeg.exited;
    feed.stop();
    untap();
    assert.equal(exit.code, 0, exit.reason);
    assert.ok(feed.sent.every((n) => n > 20), `packets fed: ${feed.sent.join(', ')}`);
    const probe = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name:format=duration', '-of', 'json', out]).toString()) as { streams: Array<{ codec_name: string }>; format: { duration: string } };
    assert.deepEqual(probe.streams.map((s) => s.codec_name).sort(), ['aac', 'h264']);
    // the picture is the test source (bright colour bars), not the dark roomCard background
    const stats = execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-ss', '3', '-i', out, '-frames:v', '1', '-vf', 'signalstats,metadata=print:key=lavfi.signalstats.YAVG:file=-', '-f', 'null', '-']).toString();
    const yavg = Number(/YAVG=([\d.]+)/.exec(stats)?.[1]);
    assert.ok(yavg > 60, `mean luma ${yavg}: the publisher's video is in the picture`);
    await room.leave();
  });
});

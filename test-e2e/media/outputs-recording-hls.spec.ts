import { execFile } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { OutputStatus } from '../../src/protocol/control.ts';
import { expect, openSdkPage, test } from '../fixtures.ts';
import { speechLaunchOptions } from './speech.ts';

test.use({ launchOptions: speechLaunchOptions() });

const run = promisify(execFile);
const HLS_JS = new URL('../../node_modules/hls.js/dist/hls.min.js', import.meta.url).pathname;

type Probe = { streams: Array<{ codec_name: string }>; format: { duration?: string } };
/** ffprobe, asynchronously: the relay it reads from runs in this process. */
async function probe(input: string): Promise<{ codecs: string[]; duration: number }> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name:format=duration', '-of', 'json', input], { timeout: 60_000 });
  const p = JSON.parse(stdout) as Probe;
  return { codecs: p.streams.map((s) => s.codec_name).sort(), duration: Number(p.format.duration) };
}

test('recording and HLS carry the stage: an MP4 as long as the time recorded, a live playlist ffprobe reads and hls.js plays in Chromium', async ({ browser, origin, relay, token }) => {
  test.setTimeout(120_000);
  const context = await browser.newContext();
  const page = await context.newPage();
  await openSdkPage(page, origin, 'esm');
  const t = token({ roomId: 'composite', participantId: 'host', grant: { canPublish: true, canSubscribe: true, canRecord: true, canHls: true } });
  const started = await page.evaluate(
    async ({ url, t }) => {
      const room = await window.Tessera.Sdk.join({ url, token: t, name: 'Host' });
      window.room = room;
      await room.localParticipant.publish('camera');
      await room.localParticipant.publish('microphone');
      const from = Date.now();
      const recording = await room.recording.start();
      const hls = await room.hls.start();
      return { from, recording: recording.info!.recording, playlist: hls.info!.playlist };
    },
    { url: relay.url, t },
  );
  const http = relay.url.replace('ws:', 'http:');
  const master = `${http}${started.playlist}`;

  // the live playlist over HTTP, while the room goes on
  expect((await probe(master)).codecs).toEqual(['aac', 'h264']);

  // hls.js plays it in Chromium (H.264 + AAC through Media Source Extensions)
  const player = await context.newPage();
  await player.goto(`${origin}/test-e2e/pages/blank.html`);
  await player.addScriptTag({ path: HLS_JS });
  const played = await player.evaluate(async (src) => {
    const supported = MediaSource.isTypeSupported('video/mp4; codecs="avc1.42E01E,mp4a.40.2"');
    const Hls = (window as unknown as { Hls: any }).Hls;
    const video = Object.assign(document.createElement('video'), { muted: true });
    document.body.append(video);
    const hls = new Hls();
    const errors: string[] = [];
    hls.on(Hls.Events.ERROR, (_: unknown, data: { fatal: boolean; details: string }) => data.fatal && errors.push(data.details));
    const subtitles = new Promise<number>((resolve) => hls.on(Hls.Events.SUBTITLE_TRACKS_UPDATED, (_: unknown, d: { subtitleTracks: unknown[] }) => resolve(d.subtitleTracks.length)));
    hls.loadSource(src);
    hls.attachMedia(video);
    await new Promise((resolve) => hls.on(Hls.Events.MANIFEST_PARSED, resolve));
    await video.play();
    const first = video.currentTime;
    // advances: bounded by the test's own timeout, never a timed assertion
    while (video.currentTime < first + 3 && errors.length === 0) await new Promise((r) => setTimeout(r, 200));
    const out = { supported, first, later: video.currentTime, errors, subtitleTracks: await subtitles };
    hls.destroy();
    return out;
  }, master);
  expect(played.supported).toBe(true);
  expect(played.errors).toEqual([]);
  expect(played.later).toBeGreaterThan(played.first + 3);
  expect(played.subtitleTracks).toBe(1);

  const stopped = await page.evaluate(async () => {
    const until = Date.now();
    const recording = await window.room!.recording.stop();
    await window.room!.hls.stop();
    return { recording, until };
  });
  const recorded = (stopped.until - started.from) / 1000;
  const files = (stopped.recording as OutputStatus<'recording'>).info!.files!;
  expect(files.map((f) => f.name).sort()).toEqual(['composite.mp4', 'host--camera.webm', 'host--microphone.webm', 'timeline.jsonl']);
  const composite = files.find((f) => f.kind === 'composite')!;
  const res = await fetch(`${http}${composite.url}`, { headers: { authorization: `Bearer ${token({ roomId: 'composite', grant: { canRecord: true } })}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('video/mp4');
  const dir = mkdtempSync(join(tmpdir(), 'tessera-e2e-composite-'));
  try {
    const file = join(dir, 'composite.mp4');
    writeFileSync(file, Buffer.from(await res.arrayBuffer()));
    const mp4 = await probe(file);
    expect(mp4.codecs).toEqual(['aac', 'h264']);
    test.info().annotations.push({ type: 'composite.mp4', description: `${mp4.duration} s for ${recorded} s recorded` });
    expect(Math.abs(mp4.duration - recorded)).toBeLessThanOrEqual(recorded * 0.1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  expect(await (await fetch(master.replace('index.m3u8', 'media.m3u8'))).text()).toMatch(/#EXT-X-ENDLIST\n$/);
});

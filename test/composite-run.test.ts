import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CompositeRun, labelText, MIN_RESTART_MS } from '../relay/outputs/ffmpeg/composite-run.ts';
import { findExecutable } from '../relay/outputs/ffmpeg/process.ts';
import { createLogger } from '../relay/log.ts';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { fakeTrack, nodePlatform } from './media-helpers.ts';
import { realTrack, type RealTrack } from './real-media.ts';
import { unrefLibraryDelays } from './media-fixtures.ts';

const FFMPEG = findExecutable('ffmpeg');
const FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf';

describe('labels', () => {
  it('a name becomes one printable, bounded line', () => {
    assert.equal(labelText('Ada\nLovelace\u0007'), 'Ada Lovelace');
    assert.equal([...labelText('é'.repeat(500))].length, 64);
    assert.equal(labelText('\n\n'), '?');
  });
});

describe('a composite that follows the stage (issue 13)', { skip: FFMPEG ? false : 'ffmpeg is not installed', timeout: 120_000 }, () => {
  let t: TestRelay;
  const dir = mkdtempSync(join(tmpdir(), 'tessera-composite-run-'));
  const senders: RealTrack[] = [];
  before(async () => {
    unrefLibraryDelays();
    t = await startTestRelay();
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

  const probe = (file: string) =>
    JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name,width:format=duration', '-of', 'json', file]).toString()) as { streams: Array<{ codec_name: string; width?: number }>; format: { duration: string } };

  it('restarts with the new stage when tracks are published, fall silent or are unpublished; each run is H.264 + AAC', async () => {
    const token = (id: string) => t.token({ roomId: 'run', participantId: id, grant: { canPublish: true, canSubscribe: true } });
    const ada = await t.join({ token: token('ada'), name: 'Ada', media: nodePlatform });
    await ada.localParticipant.publish('camera', (await real('video')).track);
    const room = t.relay.context.rooms.get('default', 'run')!;
    const failures: string[] = [];
    const composite = new CompositeRun((tap) => room.media.tap(tap), {
      ffmpeg: 'ffmpeg',
      workDir: join(dir, 'work'),
      width: 640,
      height: 360,
      fps: 15,
      videoKbps: 600,
      roomName: 'run',
      font: existsSync(FONT) ? FONT : null,
      nameOf: (id) => room.get(id)?.name ?? id,
      output: (run) => ['-f', 'mpegts', '-y', join(dir, `part-${run}.ts`)],
      failed: (reason) => failures.push(reason),
      log: createLogger('silent'),
    });
    const stage = () => composite.stage.map((s) => `${s.participantId}:${s.source}`).join(' ');
    await composite.start();
    // the camera joins the first run, or the next once its packets flow
    // a run with this stage that writes
    const writing = (want: string, what: string) => until(() => stage() === want && composite.seconds > 0.5, 15_000, what);
    await writing('ada:camera', 'the camera in the composite');
    await new Promise((r) => setTimeout(r, 1000));

    // a second speaker publishes camera and microphone at once: one restart
    const bo = await t.join({ token: token('bo'), name: 'Bo', media: nodePlatform });
    const boCamera = await real('video');
    await Promise.all([bo.localParticipant.publish('camera', boCamera.track), bo.localParticipant.publish('microphone', (await real('audio')).track)]);
    await writing('ada:camera bo:camera bo:microphone', 'the composite follows the stage');
    await new Promise((r) => setTimeout(r, 1000));
    // Bo's camera goes silent (still published): it leaves the composite, the rest goes on
    boCamera.stop();
    await writing('ada:camera bo:microphone', 'the silent camera leaves the composite');
    // Ada unpublishes: another run, Bo's microphone alone (the card with the room's name)
    await ada.localParticipant.unpublish('camera');
    await writing('bo:microphone', 'the unpublished camera leaves the composite');
    await new Promise((r) => setTimeout(r, 1000));
    await composite.stop();
    assert.deepEqual(failures, []);

    assert.equal(composite.ended.length, composite.runs);
    const wrote = composite.ended.filter((r) => r.seconds > 0.5);
    assert.ok(wrote.length >= 4, `runs that wrote: ${JSON.stringify(composite.ended)}`);
    for (const { run } of wrote) {
      const { streams, format } = probe(join(dir, `part-${run}.ts`));
      assert.deepEqual(streams.map((s) => s.codec_name).sort(), ['aac', 'h264'], `run ${run}`);
      assert.ok(Number(format.duration) > 0.5, `run ${run} lasted ${format.duration} s`);
    }
    await Promise.all([ada.leave(), bo.leave()]);
  });

  it('a track that never decodes (garbage VP8 from a member with canPublish) is left out after the stall time, and the composite writes on with the rest; it stalled every output for good', async () => {
    const token = (id: string) => t.token({ roomId: 'stall', participantId: id, grant: { canPublish: true, canSubscribe: true } });
    const ada = await t.join({ token: token('ada'), name: 'Ada', media: nodePlatform });
    await ada.localParticipant.publish('camera', (await real('video')).track);
    const mal = await t.join({ token: token('mal'), name: 'Mal', media: nodePlatform });
    const garbage = fakeTrack('video');
    senders.push({ stop: garbage.stop } as RealTrack);
    await mal.localParticipant.publish('camera', garbage.track);
    const room = t.relay.context.rooms.get('default', 'stall')!;
    const warnings: string[] = [];
    const composite = new CompositeRun((tap) => room.media.tap(tap), {
      ffmpeg: 'ffmpeg',
      workDir: join(dir, 'stall-work'),
      width: 320,
      height: 180,
      fps: 10,
      videoKbps: 300,
      roomName: 'stall',
      font: null,
      nameOf: (id) => id,
      output: (run) => ['-f', 'mpegts', '-y', join(dir, `stall-${run}.ts`)],
      failed: () => undefined,
      stallMs: 4000,
      log: { ...createLogger('silent'), warn: (message: string, fields?: Record<string, unknown>) => void warnings.push(`${message} ${JSON.stringify(fields)}`) },
    });
    const stage = () => composite.stage.map((s) => `${s.participantId}:${s.source}`).join(' ');
    try {
      await composite.start();
      // both cameras flow: a run takes both, and never writes
      await until(() => stage().includes('mal:camera'), 15_000, 'the garbage camera in a run');
      // the run stalls (a run with it writes nothing), the garbage camera is left out, and Ada's camera is written on
      await until(() => warnings.some((w) => w.includes('mal:camera')), 20_000, 'the garbage camera left out');
      await until(() => stage() === 'ada:camera' && composite.seconds > 1, 30_000, 'the composite writes without the garbage camera');
      const at = composite.seconds;
      await until(() => composite.seconds > at + 1, 10_000, 'it goes on writing');
      // published again, the same garbage is the same suspect: still left out, the composite writes on
      await mal.localParticipant.unpublish('camera');
      const again = fakeTrack('video');
      senders.push({ stop: again.stop } as RealTrack);
      await mal.localParticipant.publish('camera', again.track);
      await new Promise((r) => setTimeout(r, 3000));
      assert.equal(stage(), 'ada:camera', 'the republished garbage camera is still held out');
      const later = composite.seconds;
      await until(() => composite.seconds > later + 1, 10_000, 'it goes on writing after the republish');
    } finally {
      await composite.stop();
      await Promise.all([ada.leave(), mal.leave()]);
    }
  });

  it(`a member publishing and unpublishing in a loop restarts the composite at most once every ${MIN_RESTART_MS} ms (every 400 ms it restarted ffmpeg, 1.6 times a second)`, async () => {
    const token = (id: string) => t.token({ roomId: 'churn', participantId: id, grant: { canPublish: true, canSubscribe: true } });
    const ada = await t.join({ token: token('ada'), name: 'Ada', media: nodePlatform });
    await ada.localParticipant.publish('camera', (await real('video')).track);
    const room = t.relay.context.rooms.get('default', 'churn')!;
    const composite = new CompositeRun((tap) => room.media.tap(tap), {
      ffmpeg: 'ffmpeg',
      workDir: join(dir, 'churn-work'),
      width: 320,
      height: 180,
      fps: 10,
      videoKbps: 300,
      roomName: 'churn',
      font: null,
      nameOf: (id) => id,
      output: () => ['-f', 'null', '-'],
      failed: () => undefined,
      settleMs: 100,
      log: createLogger('silent'),
    });
    try {
      await composite.start();
      const before = composite.runs;
      const mic = await real('audio');
      const began = Date.now();
      while (Date.now() - began < 8000) {
        await ada.localParticipant.publish('microphone', mic.track);
        await new Promise((r) => setTimeout(r, 250));
        await ada.localParticipant.unpublish('microphone');
        await new Promise((r) => setTimeout(r, 250));
      }
      const restarts = composite.runs - before;
      // however long the loop took on a loaded machine: one restart begun every 2 s at most
      const elapsed = Date.now() - began;
      assert.ok(restarts <= Math.ceil(elapsed / MIN_RESTART_MS) + 1, `${restarts} restarts in ${elapsed} ms`);
    } finally {
      await composite.stop();
      await ada.leave();
    }
  });
});


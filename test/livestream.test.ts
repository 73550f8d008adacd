import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTls } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import type { OutputStatus } from '../src/protocol/control.ts';
import { runningFfmpeg } from '../relay/outputs/ffmpeg/process.ts';
import { LivestreamProvider } from '../relay/outputs/livestream.ts';
import { localProviders } from '../relay/outputs/providers.ts';
import { DEFAULTS } from '../relay/config.ts';
import { nextEvent, rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { unrefLibraryDelays } from './media-fixtures.ts';
import { nodePlatform } from './media-helpers.ts';
import { nginxRtmpMissing, probeRtmp, startNginxRtmp, type NginxRtmp } from './nginx-rtmp.ts';
import { realTrack, type RealTrack } from './real-media.ts';

const SMALL = { width: 640, height: 360, fps: 15, videoKbps: 600 };
const GRANT = { canPublish: true, canSubscribe: true, canLivestream: true };

/** An ffmpeg reading the stream from nginx as a player would, into an FLV file. */
function player(url: string, file: string): ChildProcess {
  return spawn('ffmpeg', ['-hide_banner', '-nostdin', '-loglevel', 'error', '-rw_timeout', '20000000', '-i', url, '-c', 'copy', '-f', 'flv', '-y', file], { stdio: 'ignore' });
}

/** The presentation times of a file's video packets, in order. */
function videoTimes(file: string): number[] {
  const csv = execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'v', '-show_entries', 'packet=pts_time', '-of', 'csv=p=0', file]).toString();
  return csv.split('\n').filter(Boolean).map(Number);
}

describe('livestream: the stage composite to a real RTMP server (nginx)', { skip: nginxRtmpMissing(), timeout: 180_000 }, () => {
  let t: TestRelay;
  let nginx: NginxRtmp;
  const senders: RealTrack[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'tessera-livestream-'));
  before(async () => {
    unrefLibraryDelays();
    nginx = await startNginxRtmp();
    t = await startTestRelay({ allowPrivateRtmp: true, composite: SMALL });
  });
  after(async () => {
    for (const s of senders) s.stop();
    await t.close();
    await nginx.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const real = async (kind: 'video' | 'audio') => {
    const media = await realTrack(kind);
    senders.push(media);
    return media;
  };
  const join_ = (roomId: string, id: string) => t.join({ token: t.token({ roomId, participantId: id, grant: GRANT }), name: id, media: nodePlatform });

  it('H.264 + AAC reach nginx; a player stays on the stream across a stage change; stop ends it', async (ctx) => {
    const ada = await join_('live', 'ada');
    await ada.localParticipant.publish('camera', (await real('video')).track);
    await ada.localParticipant.publish('microphone', (await real('audio')).track);
    const began = Date.now();
    const status = await ada.livestream.start({ url: nginx.stream('the-secret-key') });
    ctx.diagnostic(`start → active: ${Date.now() - began} ms`);
    assert.equal(status.state, 'active');
    assert.deepEqual(status.info, { server: nginx.url, key: 'th…' });
    assert.doesNotMatch(JSON.stringify(status), /the-secret-key/);

    const first = await probeRtmp(nginx.stream('the-secret-key'));
    assert.deepEqual(first, { codecs: ['aac', 'h264'], width: 640, height: 360 });

    // a player joins, then the stage changes (a second camera: the composite starts a new run)
    const file = join(dir, 'player.flv');
    const watching = player(nginx.stream('the-secret-key'), file);
    const bo = await join_('live', 'bo');
    try {
      await until(() => { try { return statSync(file).size > 50_000; } catch { return false; } }, 15_000, 'the player receives the stream');
      const provider = t.relay.context.rooms.get('default', 'live')!.outputs.provider('livestream') as LivestreamProvider;
      const runs = provider.runs;
      await bo.localParticipant.publish('camera', (await real('video')).track);
      await until(() => provider.runs > runs, 15_000, 'a new composite run for the new stage');
      const changedAt = provider.pushedSeconds;
      await until(() => provider.pushedSeconds > changedAt + 3, 20_000, 'the new run streams');
      assert.equal(watching.exitCode, null, 'the player is still connected');
      assert.equal(watching.signalCode, null);
      assert.deepEqual((await probeRtmp(nginx.stream('the-secret-key'))).codecs, ['aac', 'h264'], 'readable after the change');
    } finally {
      watching.kill('SIGKILL');
    }
    const times = videoTimes(file);
    assert.ok(times.length > 30, `${times.length} video packets`);
    for (let i = 1; i < times.length; i++) assert.ok(times[i]! > times[i - 1]!, `video times go on across the change (${times[i - 1]} then ${times[i]} at packet ${i})`);

    const stopped = await ada.livestream.stop();
    assert.equal(stopped.state, 'stopped');
    assert.equal(runningFfmpeg(), 0, 'no ffmpeg of the livestream left');
    await Promise.all([ada.leave(), bo.leave()]);
  });

  it('the server going away mid-stream: failed (CONNECTION_LOST, rtmp-closed) with ffmpeg\'s words, never the key', async () => {
    const own = await startNginxRtmp();
    const ada = await join_('closing', 'ada');
    try {
      await ada.livestream.start({ url: own.stream('closing-secret') });
      const failed = nextEvent(ada, 'output-changed', 20_000);
      await own.stop();
      const change = (await failed) as OutputStatus;
      assert.equal(change.state, 'failed');
      assert.equal(change.error?.code, 'CONNECTION_LOST');
      assert.equal(change.error?.reason, 'rtmp-closed');
      assert.match(change.error!.message, /^the RTMP server closed the stream: ffmpeg ended/);
      assert.doesNotMatch(change.error!.message, /closing-secret/);
      await until(() => runningFfmpeg() === 0, 10_000, 'the composite stopped with it');
    } finally {
      await own.stop();
      await ada.leave();
    }
  });

  it('rtmps: TLS by the relay to the checked address, SNI and certificate for the name; an untrusted certificate fails like any server', async () => {
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost'], { stdio: 'ignore' });
    const names: string[] = [];
    // a TLS front for nginx, as an ingest service's load balancer would be
    const front = createTls({ key: readFileSync(key), cert: readFileSync(cert) }, (socket) => {
      names.push(String((socket as unknown as { servername?: string }).servername));
      const back = connect(nginx.port, '127.0.0.1');
      socket.pipe(back).pipe(socket);
      socket.on('error', () => back.destroy());
      back.on('error', () => socket.destroy());
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    const port = (front.address() as { port: number }).port;
    const settings = { recordingsDir: join(dir, 'rec'), hlsDir: join(dir, 'hls'), hlsSegmentSeconds: 2, whiteboardBytes: DEFAULTS.whiteboardBytes };
    const tls = await startTestRelay({
      providers: {
        ...localProviders(settings),
        livestream: (c, failed) => new LivestreamProvider(c, failed, { allowPrivateRtmp: true, deadlineMs: DEFAULTS.outputStartTimeoutMs, size: SMALL, tlsCa: readFileSync(cert, 'utf8') }),
      },
    });
    const ada = await tls.join({ token: tls.token({ roomId: 'tls', participantId: 'ada', grant: GRANT }) });
    try {
      const status = await ada.livestream.start({ url: `rtmps://localhost:${port}/live/tls-key` });
      assert.deepEqual(status.info, { server: `rtmps://localhost:${port}/live`, key: 'tl…' });
      assert.deepEqual((await probeRtmp(nginx.stream('tls-key'))).codecs, ['aac', 'h264']);
      assert.deepEqual(names, ['localhost'], 'SNI carries the name');
      await ada.livestream.stop();
      // the other relay trusts Node's CA store only, which does not know the test's certificate
      const untrusted = await rejectsWith(t.join({ token: t.token({ roomId: 'tls-untrusted', participantId: 'ada', grant: GRANT }) }).then((r) => r.livestream.start({ url: `rtmps://localhost:${port}/live/tls-key` })), 'CONNECTION_FAILED');
      assert.equal(untrusted.reason, 'rtmp-failed');
    } finally {
      await ada.leave();
      await tls.close();
      front.close();
    }
  });

  it('without ffmpeg: failed, ffmpeg-missing', async () => {
    const none = await startTestRelay({ allowPrivateRtmp: true, ffmpeg: '/nonexistent/ffmpeg' });
    const ada = await none.join({ token: none.token({ roomId: 'none', participantId: 'ada', grant: GRANT }) });
    try {
      const err = await rejectsWith(ada.livestream.start({ url: nginx.stream('k') }), 'INTERNAL_ERROR');
      assert.equal(err.reason, 'ffmpeg-missing');
      assert.equal(ada.livestream.state, 'failed');
    } finally {
      await ada.leave();
      await none.close();
    }
  });
});

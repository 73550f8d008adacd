import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRelay } from '../../relay/server.ts';
import { nginxRtmpMissing, probeRtmp, startNginxRtmp } from '../../test/nginx-rtmp.ts';
import { expect, openSdkPage, test } from '../fixtures.ts';
import { speechLaunchOptions } from './speech.ts';

test.use({ launchOptions: speechLaunchOptions() });

test('livestream pushes the stage (Chromium\'s camera and speaking microphone) to a real nginx RTMP server: ffprobe reads H.264 + AAC from it', async ({ browser, origin, keys, token }) => {
  test.skip(Boolean(nginxRtmpMissing()), String(nginxRtmpMissing()));
  test.setTimeout(90_000);
  // nginx listens on 127.0.0.1 of this network namespace, where the relay runs too
  const nginx = await startNginxRtmp();
  const dir = mkdtempSync(join(tmpdir(), 'tessera-e2e-live-'));
  // a relay of its own: the RTMP server is on loopback, which only --allow-private-rtmp permits
  const relay = await startRelay({
    port: 0, keys, logLevel: 'silent', allowPrivateRtmp: true,
    recordingsDir: join(dir, 'recordings'), hlsDir: join(dir, 'hls'),
    ...(process.env.TESSERA_E2E_MEDIA_IP ? { mediaIp: process.env.TESSERA_E2E_MEDIA_IP } : {}),
  });
  try {
    const page = await (await browser.newContext()).newPage();
    await openSdkPage(page, origin, 'esm');
    const t = token({ roomId: 'live-e2e', participantId: 'host', grant: { canPublish: true, canLivestream: true } });
    const status = await page.evaluate(
      async ({ url, t, target }) => {
        const room = await window.Tessera.Sdk.join({ url, token: t, name: 'Host' });
        window.room = room;
        await room.localParticipant.publish('camera');
        await room.localParticipant.publish('microphone');
        return room.livestream.start({ url: target });
      },
      { url: relay.url, t, target: nginx.stream('e2e-stream-key') },
    );
    expect(status.state).toBe('active');
    expect(status.info).toEqual({ server: nginx.url, key: 'e2…' });

    const probed = await probeRtmp(nginx.stream('e2e-stream-key'));
    expect(probed.codecs).toEqual(['aac', 'h264']);
    expect(probed.width).toBe(1280);

    const stopped = await page.evaluate(() => window.room!.livestream.stop());
    expect(stopped.state).toBe('stopped');
    await page.evaluate(() => window.room!.leave());
  } finally {
    await relay.close();
    await nginx.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

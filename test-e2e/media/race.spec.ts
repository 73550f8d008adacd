import type { Page } from '@playwright/test';
import { expect, openSdkPage, test } from '../fixtures.ts';

/**
 * Issue 16: pressing Camera then Microphone quickly lost the camera (the relay's map of a
 * participant's publications was read before the negotiation's await and written after it, so
 * the second of two first publications replaced the first). Real Chromium, fake devices.
 */
const AV = { canPublish: true, canSubscribe: true };
const ROUNDS = 20;

async function joinPage(page: Page, origin: string, url: string, token: string): Promise<void> {
  await openSdkPage(page, origin, 'esm');
  await page.evaluate(async ({ url, token }) => {
    window.room = await window.Tessera.Sdk.join({ url, token });
    // played as an application plays it: Chromium decodes received audio only for a sink
    const players = new Map<string, HTMLAudioElement>();
    window.room.on('track-subscribed', ({ participant, publication, track }) => {
      if (track.kind !== 'audio') return;
      const audio = new Audio();
      audio.srcObject = new MediaStream([track]);
      players.set(`${participant.id}/${publication.source}`, audio);
      void audio.play();
    });
    window.room.on('track-unsubscribed', ({ participant, publication }) => {
      const key = `${participant.id}/${publication.source}`;
      players.get(key)?.pause();
      players.delete(key);
    });
  }, { url, token });
}

/**
 * What the page decodes from `from`, by source, on the current subscription: frames (video), or
 * samples decoded from packets (audio: received minus concealed; packets alone arrive whether or
 * not they decode, and concealment makes samples out of nothing).
 */
function received(page: Page, from: string) {
  return page.evaluate(async (from) => {
    const out: Record<string, number> = {};
    const remote = window.room!.remoteParticipants.get(from);
    for (const [source, publication] of remote?.tracks ?? []) {
      const report = await publication.getStats();
      report?.forEach((s: { type: string; kind?: string; framesDecoded?: number; totalSamplesReceived?: number; concealedSamples?: number }) => {
        if (s.type !== 'inbound-rtp') return;
        out[source] = s.kind === 'video' ? (s.framesDecoded ?? 0) : (s.totalSamplesReceived ?? 0) - (s.concealedSamples ?? 0);
      });
    }
    return out;
  }, from);
}

/** 100 ms of 48 kHz audio: more than one packet's worth (20 ms), so decoding goes on. */
const AUDIO_DECODED = 4800;
const decodedAll = (sources: string[]) => (got: Record<string, number>) => sources.every((s) => (got[s] ?? 0) > (s === 'microphone' ? AUDIO_DECODED : 0));

test('the two-button race, 20 times: camera and microphone published at once, every camera and microphone decoded at a subscriber', async ({ browser, origin, relay, token }) => {
  test.setTimeout(90_000);
  const a = await (await browser.newContext()).newPage();
  const b = await (await browser.newContext()).newPage();
  await joinPage(a, origin, relay.url, token({ roomId: 'race', participantId: 'a', grant: AV }));
  await joinPage(b, origin, relay.url, token({ roomId: 'race', participantId: 'b', grant: AV }));
  let decoded = 0;
  const started = Date.now();
  for (let round = 0; round < ROUNDS; round++) {
    // as two quick clicks do: the second publish starts before the first resolves
    await a.evaluate(async () => {
      const camera = window.room!.localParticipant.publish('camera');
      const microphone = window.room!.localParticipant.publish('microphone');
      await Promise.all([camera, microphone]);
    });
    await expect.poll(() => received(b, 'a').then(decodedAll(['camera', 'microphone'])), { timeout: 10_000, message: `round ${round}: camera and microphone at the subscriber` }).toBe(true);
    decoded++;
    await a.evaluate(() => Promise.all([window.room!.localParticipant.unpublish('camera'), window.room!.localParticipant.unpublish('microphone')]));
    await expect.poll(() => b.evaluate(() => window.room!.remoteParticipants.get('a')!.tracks.size)).toBe(0);
  }
  expect(decoded).toBe(ROUNDS);
  test.info().annotations.push({ type: 'figures', description: `${decoded}/${ROUNDS} cameras decoded in ${((Date.now() - started) / 1000).toFixed(1)} s` });
  console.log(`race: ${decoded}/${ROUNDS} cameras decoded in ${((Date.now() - started) / 1000).toFixed(1)} s`);
});

test('camera, screen and microphone published at once: all three decoded at a subscriber', async ({ browser, origin, relay, token }) => {
  const a = await (await browser.newContext()).newPage();
  const b = await (await browser.newContext()).newPage();
  await joinPage(a, origin, relay.url, token({ roomId: 'three', participantId: 'a', grant: AV }));
  await joinPage(b, origin, relay.url, token({ roomId: 'three', participantId: 'b', grant: AV }));
  const started = Date.now();
  await a.evaluate(async () => {
    const screen = window.fakeVideoTrack();
    const p = window.room!.localParticipant;
    await Promise.all([p.publish('camera'), p.publish('screen', screen), p.publish('microphone')]);
  });
  await expect.poll(() => received(b, 'a').then(decodedAll(['camera', 'screen', 'microphone'])), { timeout: 15_000 }).toBe(true);
  const figure = `camera, screen and microphone decoded ${((Date.now() - started) / 1000).toFixed(1)} s after the publishes began`;
  test.info().annotations.push({ type: 'figures', description: figure });
  console.log(`race: ${figure}`);
});

test('switching devices mid-call: replaceTrack and switchDevice keep the subscriber decoding, on the same subscription', async ({ browser, origin, relay, token }) => {
  const a = await (await browser.newContext()).newPage();
  const b = await (await browser.newContext()).newPage();
  await joinPage(a, origin, relay.url, token({ roomId: 'switch', participantId: 'a', grant: AV }));
  await joinPage(b, origin, relay.url, token({ roomId: 'switch', participantId: 'b', grant: AV }));
  await a.evaluate(() => window.room!.localParticipant.publish('camera'));
  const size = () =>
    b.evaluate(async () => {
      let out = { frames: 0, height: 0 };
      (await window.room!.remoteParticipants.get('a')?.tracks.get('camera')?.getStats())?.forEach((s: { type: string; framesDecoded?: number; frameHeight?: number }) => {
        if (s.type === 'inbound-rtp') out = { frames: s.framesDecoded ?? 0, height: s.frameHeight ?? 0 };
      });
      return out;
    });
  await expect.poll(async () => (await size()).height, { timeout: 10_000 }).toBe(480); // Chromium's fake camera
  // another "camera": a 640x360 canvas, sent instead without renegotiating
  const stopped = await a.evaluate(async () => {
    const camera = window.room!.localParticipant.tracks.get('camera')!;
    const captured = camera.track;
    await camera.replaceTrack(window.fakeVideoTrack(640, 360));
    return captured.readyState;
  });
  expect(stopped).toBe('ended'); // the SDK had captured it: it stopped it
  await expect.poll(async () => (await size()).height, { timeout: 10_000 }).toBe(360);
  // and back to a capture device by id
  const device = await a.evaluate(async () => {
    const [input] = (await navigator.mediaDevices.enumerateDevices()).filter((d) => d.kind === 'videoinput');
    await window.room!.localParticipant.tracks.get('camera')!.switchDevice(input!.deviceId);
    return window.room!.localParticipant.tracks.get('camera')!.track.readyState;
  });
  expect(device).toBe('live');
  await expect.poll(async () => (await size()).height, { timeout: 10_000 }).toBe(480);
  const before = (await size()).frames;
  await expect.poll(async () => (await size()).frames, { timeout: 5_000 }).toBeGreaterThan(before + 10);
  expect(await b.evaluate(() => window.room!.remoteParticipants.get('a')!.tracks.get('camera')!.subscribed)).toBe(true);
});

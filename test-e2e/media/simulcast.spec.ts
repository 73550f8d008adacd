import type { Page } from '@playwright/test';
import { expect, openSdkPage, test } from '../fixtures.ts';

const AV = { canPublish: true, canSubscribe: true };

async function join(page: Page, origin: string, url: string, token: string): Promise<void> {
  await openSdkPage(page, origin, 'esm');
  await page.evaluate(async ({ url, token }) => {
    window.room = await window.Tessera.Sdk.join({ url, token });
  }, { url, token });
}

const decodedWidth = (page: Page) =>
  page.evaluate(async () => {
    const publication = window.room!.remoteParticipants.get('a')?.tracks.get('camera');
    let width = 0;
    (await publication?.getStats())?.forEach((s: { type: string; frameWidth?: number }) => {
      if (s.type === 'inbound-rtp' && s.frameWidth) width = s.frameWidth;
    });
    return width;
  });

test('simulcast: the relay forwards the layer that fits each subscriber, and switches when asked', async ({ browser, origin, relay, token }) => {
  const a = await (await browser.newContext()).newPage();
  const small = await (await browser.newContext()).newPage();
  const large = await (await browser.newContext()).newPage();
  await join(a, origin, relay.url, token({ roomId: 'simulcast', participantId: 'a', grant: AV }));
  const settings = await a.evaluate(async () => (await window.room!.localParticipant.publish('camera')).track.getSettings());
  expect(settings.width).toBe(640); // Chromium's fake camera: layers h (320x240) and f (640x480)
  await join(small, origin, relay.url, token({ roomId: 'simulcast', participantId: 'small', grant: AV }));
  await join(large, origin, relay.url, token({ roomId: 'simulcast', participantId: 'large', grant: AV }));
  await small.evaluate(() => window.room!.remoteParticipants.get('a')!.tracks.get('camera')!.setPreferredSize({ maxWidth: 320, maxHeight: 240 }));
  await expect.poll(() => decodedWidth(large), { timeout: 20_000 }).toBe(640);
  await expect.poll(() => decodedWidth(small), { timeout: 20_000 }).toBe(320);
  // the small subscriber's tile grows: it gets the full layer; the large one shrinks
  await small.evaluate(() => window.room!.remoteParticipants.get('a')!.tracks.get('camera')!.setPreferredSize({ maxWidth: 1280, maxHeight: 720 }));
  await large.evaluate(() => window.room!.remoteParticipants.get('a')!.tracks.get('camera')!.setPreferredSize({ maxWidth: 200, maxHeight: 150 }));
  await expect.poll(() => decodedWidth(small), { timeout: 20_000 }).toBe(640);
  await expect.poll(() => decodedWidth(large), { timeout: 20_000 }).toBe(320);
});

import type { Page } from '@playwright/test';
import { expect, openSdkPage, test } from '../fixtures.ts';

const AV = { canPublish: true, canSubscribe: true };

/** Join in the page; the room is `window.room`; track events are recorded on `window.log`. */
async function joinPage(page: Page, origin: string, url: string, token: string): Promise<void> {
  await openSdkPage(page, origin, 'esm');
  await page.evaluate(async ({ url, token }) => {
    const room = await window.Tessera.Sdk.join({ url, token });
    window.room = room;
    const w = window as unknown as { log: string[] };
    w.log = [];
    for (const name of ['track-published', 'track-unpublished', 'track-subscribed', 'track-unsubscribed', 'track-muted', 'track-unmuted'] as const) {
      room.on(name, (e) => w.log.push(`${name}:${e.participant.id}:${e.publication.source}`));
    }
    room.on('track-subscription-failed', (e) => w.log.push(`track-subscription-failed:${e.publication.source}:${e.error.code}`));
    room.on('local-track-unpublished', (e) => w.log.push(`local-track-unpublished:${e.publication.source}:${e.reason}`));
  }, { url, token });
}

const log = (page: Page) => page.evaluate(() => (window as unknown as { log: string[] }).log);

/** Inbound stats of the page's subscription to `from`'s `source`. */
function inbound(page: Page, from: string, source: string) {
  return page.evaluate(async ({ from, source }) => {
    const publication = window.room!.remoteParticipants.get(from)?.tracks.get(source as 'camera');
    const report = await publication?.getStats();
    let out = { framesDecoded: 0, packetsReceived: 0, frameWidth: 0 };
    report?.forEach((s: Record<string, number> & { type: string }) => {
      if (s.type === 'inbound-rtp') out = { framesDecoded: s.framesDecoded ?? 0, packetsReceived: s.packetsReceived ?? 0, frameWidth: s.frameWidth ?? 0 };
    });
    return out;
  }, { from, source });
}

test('A publishes camera and microphone from fake devices; B decodes video frames and receives audio', async ({ browser, origin, relay, token }) => {
  const a = await (await browser.newContext()).newPage();
  const b = await (await browser.newContext()).newPage();
  await joinPage(a, origin, relay.url, token({ roomId: 'av', participantId: 'a', grant: AV }));
  await joinPage(b, origin, relay.url, token({ roomId: 'av', participantId: 'b', grant: AV }));
  await a.evaluate(async () => {
    await window.room!.localParticipant.publish('camera');
    await window.room!.localParticipant.publish('microphone');
  });
  await expect.poll(() => log(b), { timeout: 15_000 }).toEqual(expect.arrayContaining(['track-subscribed:a:camera', 'track-subscribed:a:microphone']));
  await expect.poll(async () => (await inbound(b, 'a', 'camera')).framesDecoded, { timeout: 15_000 }).toBeGreaterThan(5);
  await expect.poll(async () => (await inbound(b, 'a', 'microphone')).packetsReceived, { timeout: 15_000 }).toBeGreaterThan(10);
  expect((await inbound(b, 'a', 'camera')).frameWidth).toBeGreaterThan(0);
});

test('a screen share from a fake capture reaches the other page', async ({ browser, origin, relay, token }) => {
  const a = await (await browser.newContext()).newPage();
  const b = await (await browser.newContext()).newPage();
  await joinPage(a, origin, relay.url, token({ roomId: 'screen', participantId: 'a', grant: AV }));
  await joinPage(b, origin, relay.url, token({ roomId: 'screen', participantId: 'b', grant: AV }));
  await a.evaluate(async () => {
    await window.room!.localParticipant.publish('screen', window.fakeVideoTrack());
  });
  await expect.poll(async () => (await inbound(b, 'a', 'screen')).framesDecoded, { timeout: 15_000 }).toBeGreaterThan(5);
});

test('the relay enforces canPublish, canPublishSources and canSubscribe; no media reaches a participant without canSubscribe', async ({ browser, origin, relay, token }) => {
  const pub = await (await browser.newContext()).newPage();
  const limited = await (await browser.newContext()).newPage();
  const deaf = await (await browser.newContext()).newPage();
  await joinPage(pub, origin, relay.url, token({ roomId: 'rules', participantId: 'pub', grant: AV }));
  await joinPage(limited, origin, relay.url, token({ roomId: 'rules', participantId: 'limited', grant: { canPublish: true, canPublishSources: ['microphone'], canSubscribe: true } }));
  await joinPage(deaf, origin, relay.url, token({ roomId: 'rules', participantId: 'deaf', grant: { canPublish: false } }));
  const attempt = (page: Page, source: string) =>
    page.evaluate((source) => window.room!.localParticipant.publish(source as 'camera').then(() => 'ok', (e: { code: string; reason: string }) => `${e.code}/${e.reason}`), source);
  expect(await attempt(deaf, 'microphone')).toBe('INVALID_PERMISSIONS/missing-canPublish');
  expect(await attempt(limited, 'camera')).toBe('INVALID_PERMISSIONS/source-not-allowed');
  expect(await attempt(limited, 'microphone')).toBe('ok');
  await pub.evaluate(() => window.room!.localParticipant.publish('camera'));
  await expect.poll(() => log(deaf), { timeout: 15_000 }).toEqual(expect.arrayContaining(['track-subscription-failed:camera:INVALID_PERMISSIONS', 'track-subscription-failed:microphone:INVALID_PERMISSIONS']));
  await expect.poll(async () => (await inbound(limited, 'pub', 'camera')).framesDecoded, { timeout: 15_000 }).toBeGreaterThan(0);
  expect(await inbound(deaf, 'pub', 'camera')).toEqual({ framesDecoded: 0, packetsReceived: 0, frameWidth: 0 });
});

test('mute and unmute are seen remotely; unpublish and leave clean up on B; a late subscriber decodes quickly', async ({ browser, origin, relay, token }) => {
  const a = await (await browser.newContext()).newPage();
  const b = await (await browser.newContext()).newPage();
  await joinPage(a, origin, relay.url, token({ roomId: 'life', participantId: 'a', grant: AV }));
  await a.evaluate(() => window.room!.localParticipant.publish('camera'));
  // B arrives late: its subscription asks the relay for a key frame and decodes without waiting for the next periodic one
  await joinPage(b, origin, relay.url, token({ roomId: 'life', participantId: 'b', grant: AV }));
  await expect.poll(async () => (await inbound(b, 'a', 'camera')).framesDecoded, { timeout: 5_000 }).toBeGreaterThan(0);
  await a.evaluate(() => window.room!.localParticipant.tracks.get('camera')!.mute());
  await expect.poll(() => log(b)).toContain('track-muted:a:camera');
  expect(await b.evaluate(() => window.room!.remoteParticipants.get('a')!.tracks.get('camera')!.muted)).toBe(true);
  await a.evaluate(() => window.room!.localParticipant.tracks.get('camera')!.unmute());
  await expect.poll(() => log(b)).toContain('track-unmuted:a:camera');
  await a.evaluate(() => window.room!.localParticipant.unpublish('camera'));
  await expect.poll(() => log(b)).toEqual(expect.arrayContaining(['track-unsubscribed:a:camera', 'track-unpublished:a:camera']));
  expect(await b.evaluate(() => window.room!.remoteParticipants.get('a')!.tracks.size)).toBe(0);
  await a.evaluate(() => window.room!.localParticipant.publish('camera'));
  await expect.poll(() => log(b)).toContain('track-published:a:camera');
  await expect.poll(async () => (await inbound(b, 'a', 'camera')).framesDecoded, { timeout: 10_000 }).toBeGreaterThan(0);
  await a.evaluate(() => window.room!.leave());
  await expect.poll(() => b.evaluate(() => window.room!.remoteParticipants.has('a'))).toBe(false);
  expect((await log(b)).filter((l) => l === 'track-unsubscribed:a:camera')).toHaveLength(2);
});

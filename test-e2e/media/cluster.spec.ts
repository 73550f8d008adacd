import type { Page } from '@playwright/test';
import { startRelay, type Relay } from '../../relay/server.ts';
import { startRedis, type TestRedis } from '../../test/redis.ts';
import { expect, openSdkPage, test } from '../fixtures.ts';

/**
 * Issue 14: real Chromium on two relay nodes sharing a Redis. The room opens on node A (its
 * home, where its media lives); a page connected to node B subscribes to a camera published by
 * a page connected to node A and decodes it.
 */
const AV = { canPublish: true, canSubscribe: true };

async function joinPage(page: Page, origin: string, url: string, token: string): Promise<void> {
  await openSdkPage(page, origin, 'esm');
  await page.evaluate(async ({ url, token }) => {
    window.room = await window.Tessera.Sdk.join({ url, token });
  }, { url, token });
}

function framesDecoded(page: Page, from: string): Promise<number> {
  return page.evaluate(async (from) => {
    const report = await window.room!.remoteParticipants.get(from)?.tracks.get('camera')?.getStats();
    let frames = 0;
    report?.forEach((s: Record<string, number> & { type: string }) => {
      if (s.type === 'inbound-rtp') frames = s.framesDecoded ?? 0;
    });
    return frames;
  }, from);
}

test('a camera published on node A is decoded by a page on node B', async ({ browser, origin, keys, token }) => {
  let redis: TestRedis | null = null;
  const nodes: Relay[] = [];
  try {
    redis = await startRedis();
    for (let i = 0; i < 2; i++) {
      nodes.push(await startRelay({ port: 0, keys, logLevel: 'silent', redis: redis.url, ...(process.env.TESSERA_E2E_MEDIA_IP ? { mediaIp: process.env.TESSERA_E2E_MEDIA_IP } : {}) }));
    }
    const a = await (await browser.newContext()).newPage();
    const b = await (await browser.newContext()).newPage();
    await joinPage(a, origin, nodes[0]!.url, token({ roomId: 'cluster-av', participantId: 'a', grant: AV }));
    await joinPage(b, origin, nodes[1]!.url, token({ roomId: 'cluster-av', participantId: 'b', grant: AV }));
    await a.evaluate(() => window.room!.localParticipant.publish('camera'));
    await expect.poll(() => framesDecoded(b, 'a'), { timeout: 20_000 }).toBeGreaterThan(5);
    expect(nodes[0]!.context.rooms.get('default', 'cluster-av')?.media.stats().publications).toBe(1);
    expect(nodes[1]!.context.rooms.get('default', 'cluster-av')).toBeUndefined();
    await a.close();
    await b.close();
  } finally {
    for (const n of nodes) await n.close();
    await redis?.stop();
  }
});

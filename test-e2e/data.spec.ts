import { expect, openSdkPage, test } from './fixtures.ts';

const DATA = { canPublishData: true, canSubscribeData: true };

test('two pages chat through pubsub, with history for a late joiner and a direct message', async ({ browser, origin, relay, token }) => {
  const pages = await Promise.all([0, 1, 2].map(async () => (await browser.newContext()).newPage()));
  for (const page of pages) await openSdkPage(page, origin, 'esm');
  const join = (page: (typeof pages)[number], id: string) =>
    page.evaluate(async ({ url, t }) => {
      const room = await window.Tessera.Sdk.join({ url, token: t });
      window.room = room;
      const w = window as unknown as { inbox: unknown[] };
      w.inbox = [];
      await room.pubsub.subscribe('chat', (m) => w.inbox.push({ from: m.from, payload: m.payload }));
    }, { url: relay.url, t: token({ roomId: 'chat-e2e', participantId: id, grant: DATA }) });
  const [ada, bob, cy] = pages as [typeof pages[0], typeof pages[0], typeof pages[0]];
  await join(ada, 'ada');
  await join(bob, 'bob');
  await ada.evaluate(() => window.room!.pubsub.publish('chat', { text: 'hi bob' }, { persist: true }));
  await bob.evaluate(() => window.room!.pubsub.publish('chat', { text: 'hi ada' }, { persist: true }));
  const inbox = (page: typeof ada) => page.evaluate(() => (window as unknown as { inbox: unknown[] }).inbox);
  await expect.poll(() => inbox(bob)).toEqual([{ from: 'ada', payload: { text: 'hi bob' } }]);
  await expect.poll(() => inbox(ada)).toEqual([{ from: 'bob', payload: { text: 'hi ada' } }]);
  await join(cy, 'cy');
  const history = await cy.evaluate(async () => (await window.room!.pubsub.getHistory('chat')).map((m) => `${m.from}: ${(m.payload as { text: string }).text}`));
  expect(history).toEqual(['ada: hi bob', 'bob: hi ada']);
  await ada.evaluate(() => window.room!.pubsub.publish('chat', { text: 'just for cy' }, { to: ['cy'] }));
  await expect.poll(() => inbox(cy)).toEqual([{ from: 'ada', payload: { text: 'just for cy' } }]);
  await bob.waitForTimeout(100);
  expect(await inbox(bob)).toHaveLength(1);
});

test('a generated file streams page to page as a Blob, byte-exact, with progress', async ({ browser, origin, relay, token }) => {
  const sender = await (await browser.newContext()).newPage();
  const receiver = await (await browser.newContext()).newPage();
  await openSdkPage(sender, origin, 'iife');
  await openSdkPage(receiver, origin, 'esm');
  await receiver.evaluate(async ({ url, t }) => {
    const room = await window.Tessera.Sdk.join({ url, token: t });
    window.room = room;
    const w = window as unknown as { received: Promise<unknown> };
    w.received = new Promise((resolve) =>
      room.dataStream.on('stream', async (stream) => {
        const blob = await stream.readBlob();
        const digest = await crypto.subtle.digest('SHA-256', await blob.arrayBuffer());
        resolve({ name: stream.name, type: blob.type, size: blob.size, from: stream.from, sha: [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('') });
      }),
    );
  }, { url: relay.url, t: token({ roomId: 'file-e2e', participantId: 'receiver', grant: DATA }) });
  const sent = await sender.evaluate(async ({ url, t }) => {
    const room = await window.Tessera.Sdk.join({ url, token: t });
    const bytes = new Uint8Array(3 * 1024 * 1024 + 123);
    for (let i = 0; i < bytes.length; i += 65536) crypto.getRandomValues(bytes.subarray(i, Math.min(bytes.length, i + 65536)));
    const file = new File([bytes], 'generated.bin', { type: 'application/octet-stream' });
    const progress: number[] = [];
    await room.dataStream.send(file, { onProgress: ({ sent }) => progress.push(sent) });
    const digest = await crypto.subtle.digest('SHA-256', bytes);
    return { sha: [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join(''), progress: progress.length, last: progress.at(-1) };
  }, { url: relay.url, t: token({ roomId: 'file-e2e', participantId: 'sender', grant: DATA }) });
  const received = await receiver.evaluate(() => (window as unknown as { received: Promise<unknown> }).received);
  expect(received).toEqual({ name: 'generated.bin', type: 'application/octet-stream', size: 3 * 1024 * 1024 + 123, from: 'sender', sha: sent.sha });
  expect(sent.last).toBe(3 * 1024 * 1024 + 123);
  expect(sent.progress).toBeGreaterThan(1);
});

import { expect, openSdkPage, test } from './fixtures.ts';

test('a moderator page admits a guest page from the lobby, then removes a participant', async ({ browser, origin, relay, token }) => {
  const [modPage, guestPage, otherPage] = await Promise.all([0, 1, 2].map(async () => (await browser.newContext()).newPage()));
  for (const page of [modPage!, guestPage!, otherPage!]) await openSdkPage(page, origin, 'esm');
  await modPage!.evaluate(async ({ url, t }) => {
    const room = await window.Tessera.Sdk.join({ url, token: t, name: 'Mod' });
    window.room = room;
    const w = window as unknown as { requests: string[]; resolved: string[] };
    w.requests = [];
    w.resolved = [];
    room.on('lobby-request', ({ participantId, name }) => w.requests.push(`${participantId}:${name}`));
    room.on('lobby-resolved', ({ participantId, outcome }) => w.resolved.push(`${participantId}:${outcome}`));
  }, { url: relay.url, t: token({ roomId: 'mod-e2e', participantId: 'mod', grant: { canModerate: true } }) });

  // the guest's join stays pending in the lobby
  await guestPage!.evaluate(({ url, t }) => {
    const w = window as unknown as { joinState: string; waited: boolean };
    w.joinState = 'pending';
    w.waited = false;
    window.Tessera.Sdk.join({ url, token: t, name: 'Guest', onWaiting: () => (w.waited = true) }).then(
      (room) => {
        window.room = room;
        w.joinState = `joined:${room.id}`;
      },
      (err: { code: string }) => (w.joinState = `error:${err.code}`),
    );
  }, { url: relay.url, t: token({ roomId: 'mod-e2e', participantId: 'guest', grant: {}, joinPolicy: { mode: 'ask', ttl: 30 } }) });
  await expect.poll(() => modPage!.evaluate(() => (window as unknown as { requests: string[] }).requests)).toEqual(['guest:Guest']);
  expect(await guestPage!.evaluate(() => (window as unknown as { waited: boolean; joinState: string }).waited)).toBe(true);
  expect(await guestPage!.evaluate(() => (window as unknown as { joinState: string }).joinState)).toBe('pending');
  expect(await modPage!.evaluate(() => window.room!.lobby.pending.map((r) => r.participantId))).toEqual(['guest']);

  await modPage!.evaluate(() => window.room!.lobby.admit('guest'));
  await expect.poll(() => guestPage!.evaluate(() => (window as unknown as { joinState: string }).joinState)).toBe('joined:mod-e2e');
  await expect.poll(() => modPage!.evaluate(() => (window as unknown as { resolved: string[] }).resolved)).toEqual(['guest:admitted']);
  await expect.poll(() => modPage!.evaluate(() => [...window.room!.remoteParticipants.keys()])).toEqual(['guest']);

  // a third participant joins; the moderator removes it; everyone sees it go
  const otherToken = token({ roomId: 'mod-e2e', participantId: 'other', grant: {} });
  await otherPage!.evaluate(async ({ url, t }) => {
    const room = await window.Tessera.Sdk.join({ url, token: t });
    window.room = room;
    const w = window as unknown as { reason: string | null };
    w.reason = null;
    room.on('disconnected', ({ reason }) => (w.reason = reason));
  }, { url: relay.url, t: otherToken });
  await expect.poll(() => modPage!.evaluate(() => window.room!.remoteParticipants.has('other'))).toBe(true);
  await modPage!.evaluate(() => window.room!.remoteParticipants.get('other')!.remove());
  await expect.poll(() => otherPage!.evaluate(() => (window as unknown as { reason: string | null }).reason)).toBe('removed');
  await expect.poll(() => guestPage!.evaluate(() => window.room!.remoteParticipants.has('other'))).toBe(false);
  // the removed page cannot come straight back with the same token; a newly minted one works
  const rejoin = (t: string) =>
    otherPage!.evaluate(async ({ url, t }) => window.Tessera.Sdk.join({ url, token: t }).then(() => 'joined', (e: { code: string; reason: string }) => `${e.code}/${e.reason}`), { url: relay.url, t });
  expect(await rejoin(otherToken)).toBe('UNAUTHORIZED_PARTICIPANT/removed');
  expect(await rejoin(token({ roomId: 'mod-e2e', participantId: 'other', grant: {}, ttl: 3599 }))).toBe('joined');
});

import { WebSocket } from 'ws';
import { Sdk } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import { expect, openSdkPage, test } from './fixtures.ts';

(globalThis as { WebSocket?: unknown }).WebSocket ??= WebSocket;

test('a speaker page and a viewer page see the same stage and the same counts', async ({ browser, origin, relay, token }) => {
  const speakerPage = await (await browser.newContext()).newPage();
  const viewerPage = await (await browser.newContext()).newPage();
  await openSdkPage(speakerPage, origin, 'esm');
  await openSdkPage(viewerPage, origin, 'iife');
  const join = (page: typeof speakerPage, t: string) =>
    page.evaluate(async ({ url, t }) => {
      const room = await window.Tessera.Sdk.join({ url, token: t, name: 'page' });
      window.room = room;
      const w = window as unknown as { seen: { joined: string[]; left: string[] } };
      w.seen = { joined: [], left: [] };
      room.on('participant-joined', ({ participant }) => w.seen.joined.push(participant.id));
      room.on('participant-left', ({ participant }) => w.seen.left.push(participant.id));
    }, { url: relay.url, t });
  await join(speakerPage, token({ roomId: 'tiers-e2e', participantId: 'stage-page', grant: { canPublish: true } }));
  await join(viewerPage, token({ roomId: 'tiers-e2e', isViewer: true, grant: { canSubscribe: true } }));
  // more people from Node: two on stage, twenty in the audience through one shared token
  const shared = token({ isViewer: true, grant: { canSubscribe: true }, ttl: 600 });
  const node: Room[] = [
    await Sdk.join({ url: relay.url, token: token({ roomId: 'tiers-e2e', participantId: 'node-a', grant: {} }) }),
    await Sdk.join({ url: relay.url, token: token({ roomId: 'tiers-e2e', participantId: 'node-b', grant: {} }) }),
    ...(await Promise.all(Array.from({ length: 20 }, () => Sdk.join({ url: relay.url, token: shared, roomId: 'tiers-e2e' })))),
  ];
  const view = (page: typeof speakerPage) =>
    page.evaluate(() => ({
      stage: [...window.room!.remoteParticipants.keys()].sort(),
      counts: window.room!.participantCount,
      seen: (window as unknown as { seen: { joined: string[]; left: string[] } }).seen,
    }));
  const expected = { speaker: 3, viewer: 21, total: 24 };
  await expect.poll(async () => (await view(viewerPage)).counts).toEqual(expected);
  await expect.poll(async () => (await view(speakerPage)).counts).toEqual(expected);
  const fromViewer = await view(viewerPage);
  const fromSpeaker = await view(speakerPage);
  expect(fromViewer.stage).toEqual(['node-a', 'node-b', 'stage-page']);
  expect(fromSpeaker.stage).toEqual(['node-a', 'node-b']);
  expect(fromViewer.seen.joined.sort()).toEqual(['node-a', 'node-b', 'stage-page']);
  expect(fromSpeaker.seen.joined.sort()).toEqual(['node-a', 'node-b']);
  // viewers leave: counts change, no participant-left anywhere
  await Promise.all(node.slice(2).map((r) => r.leave()));
  await expect.poll(async () => (await view(viewerPage)).counts).toEqual({ speaker: 3, viewer: 1, total: 4 });
  await expect.poll(async () => (await view(speakerPage)).counts).toEqual({ speaker: 3, viewer: 1, total: 4 });
  expect((await view(viewerPage)).seen.left).toEqual([]);
  await node[0]!.leave();
  await expect.poll(async () => (await view(viewerPage)).seen.left).toEqual(['node-a']);
  await node[1]!.leave();
});

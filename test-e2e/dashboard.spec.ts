import type { ChildProcess } from 'node:child_process';
import { WebSocket } from 'ws';
import { expect, test } from '@playwright/test';
import { Sdk } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import { startExample } from './start-example.ts';

(globalThis as { WebSocket?: unknown }).WebSocket ??= WebSocket;

/**
 * `npm start`'s moderation dashboard (examples/dashboard/): rooms, both tiers paged, remove,
 * end, recordings and the live list of webhooks, all through the token server's RoomService
 * and WebhookReceiver against the real relay.
 */
let child: ChildProcess;
let web = '';

test.beforeAll(async () => {
  ({ child, web } = await startExample({ TESSERA_LOG_LEVEL: 'warn' }));
});
test.afterAll(() => child.kill('SIGTERM'));

/** Join through the token server, as its own pages do: log in, ask for a token of a role. */
async function joinAs(name: string, role: string, room = 'dash-e2e'): Promise<Room> {
  const login = await fetch(`${web}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name, password: 'tessera' }) });
  const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
  const answer = (await (await fetch(`${web}/api/token`, { method: 'POST', headers: { 'content-type': 'application/json', cookie }, body: JSON.stringify({ room, role }) })).json()) as { token: string; url: string };
  return Sdk.join({ url: answer.url, token: answer.token, name });
}

test('the dashboard lists rooms and both tiers page by page, removes a speaker and a viewer, shows recordings and webhooks, ends the room', async ({ page }) => {
  await page.goto(`${web}/examples/dashboard/`);
  await page.fill('#password', 'wrong');
  await page.click('#login button[type=submit]');
  await expect(page.locator('#login-error')).toHaveText('wrong password');
  await page.fill('#password', 'tessera');
  await page.click('#login button[type=submit]');
  await expect(page.locator('#dashboard')).toBeVisible();

  const mod = await joinAs('Mod', 'moderator');
  const bob = await joinAs('Bob', 'speaker');
  const viewers: Room[] = [];
  for (let i = 0; i < 12; i++) viewers.push(await joinAs(`V${i}`, 'viewer'));
  const bobGone = new Promise((resolve) => bob.on('disconnected', resolve));
  const lastViewerGone = new Promise((resolve) => viewers[11]!.on('disconnected', resolve));
  const modGone = new Promise((resolve) => mod.on('disconnected', resolve));

  // a recording, started and stopped by the moderator: its files are listed, recording-ready arrives
  await mod.recording.start();
  await mod.recording.stop();

  // webhooks reach the token server and show up live
  const events = page.locator('#events li');
  await expect(events.filter({ hasText: 'room-started dash-e2e' })).toHaveCount(1);
  await expect(events.filter({ hasText: 'participant-joined dash-e2e bob-speaker' })).toHaveCount(1);
  await expect(events.filter({ hasText: 'recording-ready dash-e2e' })).toHaveCount(1);
  await expect(events.filter({ hasText: 'participant-joined dash-e2e' })).toHaveCount(2); // viewers are not reported by default

  await page.click('#refresh');
  await expect(page.locator('#rooms li[data-room="dash-e2e"]')).toContainText('2 on stage, 12 watching');
  await page.locator('#rooms li[data-room="dash-e2e"] button').click();
  await expect(page.locator('#room-name')).toHaveText('dash-e2e');
  await expect(page.locator('#participants li')).toHaveText([/Mod \(mod-moderator\)/, /Bob \(bob-speaker\)/]);
  await expect(page.locator('#recordings li a').first()).toHaveText(/timeline|\.mp4|\.webm/);

  // the audience, ten at a time
  await page.click('button.tier[data-tier="viewer"]');
  await expect(page.locator('#participants li')).toHaveCount(10);
  await page.click('#more-participants');
  await expect(page.locator('#participants li')).toHaveCount(12);
  await expect(page.locator('#more-participants')).toBeHidden();
  const lastViewer = viewers[11]!.localParticipant.id;
  await page.locator(`#participants li[data-participant="${lastViewer}"] button`).click();
  expect(await lastViewerGone).toEqual({ reason: 'removed' });
  await expect(page.locator(`#participants li[data-participant="${lastViewer}"]`)).toHaveCount(0);

  await page.click('button.tier[data-tier="speaker"]');
  await page.locator('#participants li[data-participant="bob-speaker"] button').click();
  expect(await bobGone).toEqual({ reason: 'removed' });
  await expect(events.filter({ hasText: 'participant-left dash-e2e bob-speaker' })).toHaveCount(1);

  await page.click('#end');
  expect(await modGone).toEqual({ reason: 'room-ended' });
  await expect(events.filter({ hasText: 'room-finished dash-e2e' })).toHaveCount(1);
  await expect(page.locator('#rooms li[data-room="dash-e2e"]')).toHaveCount(0);
  await page.screenshot({ path: 'test-results/dashboard.png', fullPage: true });
});

import { expect, test, type Page } from '@playwright/test';
import { stageDemo } from './stage-demo.ts';

/** The stage demo as a person uses it: `npm start`'s script, three browsers. */
const { open } = stageDemo('stage-e2e');

const videoWidth = (page: Page, tile: string) => page.evaluate((id) => (document.querySelector(`#${id} video`) as HTMLVideoElement | null)?.videoWidth ?? 0, tile);

test('the stage demo: join, see each other, chat, admit a guest from the lobby, moderate', async ({ browser }) => {
  const mod = await open(browser, 'Mo', 'moderator');
  await expect(mod.locator('#room-screen')).toBeVisible();
  const ada = await open(browser, 'Ada', 'speaker');
  await expect(ada.locator('#room-screen')).toBeVisible();

  // see each other, then video
  await expect(mod.locator('#tile-ada-speaker')).toBeVisible();
  await expect(ada.locator('#tile-mo-moderator')).toBeVisible();
  await ada.click('[data-source=camera]');
  await expect(ada.locator('[data-source=camera]')).toHaveAttribute('aria-pressed', 'true');
  await expect.poll(() => videoWidth(mod, 'tile-ada-speaker'), { timeout: 15_000 }).toBeGreaterThan(0);
  await mod.click('[data-source=camera]');
  await expect.poll(() => videoWidth(ada, 'tile-mo-moderator'), { timeout: 15_000 }).toBeGreaterThan(0);

  // chat, a direct message, and history for someone who comes later
  await ada.fill('#chat-text', 'Hello everyone');
  await ada.press('#chat-text', 'Enter');
  await expect(mod.locator('#messages')).toContainText('Hello everyone');
  await mod.selectOption('#chat-to', { label: 'Ada' });
  await mod.fill('#chat-text', 'Psst, your mic');
  await mod.press('#chat-text', 'Enter');
  await expect(ada.locator('#messages li.direct')).toContainText('Psst, your mic');
  const vic = await open(browser, 'Vic', 'viewer');
  await expect(vic.locator('#messages')).toContainText('Hello everyone');
  await expect(vic.locator('#messages')).not.toContainText('Psst');
  await expect(vic.locator('#c-viewer')).toHaveText('1');
  await expect(vic.locator('#controls')).toBeHidden();

  // a guest asks; the moderator admits from the lobby
  const gus = await open(browser, 'Gus', 'guest', false);
  await expect(gus.locator('#waiting')).toBeVisible();
  await mod.click('[data-tab=lobby]');
  await expect(mod.locator('#lobby-badge')).toHaveText('1');
  await mod.locator('#lobby-gus-guest').getByRole('button', { name: 'Admit' }).click();
  await expect(gus.locator('#room-screen')).toBeVisible();
  await expect(mod.locator('#tile-gus-guest')).toBeVisible();

  // outputs and the whiteboard
  await mod.click('[data-tab=outputs]');
  await mod.locator('#outputs li', { hasText: 'Whiteboard' }).getByRole('button', { name: 'Start' }).click();
  await expect(ada.locator('#board-panel')).toBeVisible();
  await mod.click('[data-tab=people]');
  // docs/images/stage.png is a copy of this, refreshed by hand when the demo changes
  await mod.screenshot({ path: 'test-results/stage.png' });

  // moderation: the viewer list page by page, then removing the guest
  await mod.click('#load-more');
  await expect(mod.locator('#audience-list li')).toHaveCount(1);
  await mod.locator('#person-gus-guest').getByRole('button', { name: 'Remove' }).click();
  await expect(gus.locator('#join-screen')).toBeVisible({ timeout: 10_000 });
  await expect(mod.locator('#tile-gus-guest')).toHaveCount(0);

  // a refusal is a sentence: a speaker cannot start a recording (sent anyway, refused by the relay)
  const refused = await ada.evaluate(() => (window as unknown as { room: { recording: { start(): Promise<unknown> } } }).room.recording.start().then(() => 'ok', (e: { code: string }) => e.code));
  expect(refused).toBe('INVALID_PERMISSIONS');
});

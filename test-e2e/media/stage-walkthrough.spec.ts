import { readFileSync, statSync } from 'node:fs';
import { expect, test, type Page } from '@playwright/test';
import { stageDemo } from './stage-demo.ts';

/**
 * The stage demo as issue 16 found it, walked through as a person would: a screen share beside
 * the camera (muted on its own tile), names instead of ids and never a name a sender wrote
 * itself, a direct message to a viewer, the audience list following joins and removals (the
 * moderator's own, and the server API's), a recording downloaded from the page, and what people
 * see when they are removed or the room ends. Each step leaves a screenshot in test-results/.
 */
const { open } = stageDemo('walkthrough');

const videoWidth = (page: Page, tile: string) => page.evaluate((id) => (document.querySelector(`#${id} video:not([hidden])`) as HTMLVideoElement | null)?.videoWidth ?? 0, tile);

async function shot(page: Page, name: string): Promise<void> {
  const path = `test-results/walkthrough-${name}.png`;
  await page.screenshot({ path });
  expect(statSync(path).size).toBeGreaterThan(10_000);
}

/** The texts the `.from` label of the message saying `text` has had on `page`, from now on. */
async function recordLabels(page: Page, text: string): Promise<() => Promise<string[]>> {
  await page.evaluate((text) => {
    const seen: string[] = [];
    (window as unknown as { labels: string[] }).labels = seen;
    const look = () => {
      for (const li of Array.from(document.querySelectorAll('#messages li'))) {
        const label = li.querySelector('.from')?.textContent;
        if (li.textContent?.includes(text) && label && seen.at(-1) !== label) seen.push(label);
      }
    };
    new MutationObserver(look).observe(document.getElementById('messages')!, { childList: true, subtree: true, characterData: true });
  }, text);
  return () => page.evaluate(() => (window as unknown as { labels: string[] }).labels);
}

test('the stage demo walkthrough: screen beside camera, names, DMs to viewers, audience list, recordings, removal and ending explained', async ({ browser }) => {
  test.setTimeout(150_000);
  const mod = await open(browser, 'Mo', 'moderator');
  const ada = await open(browser, 'Ada', 'speaker');

  // the demo's own buttons pressed as an impatient user does: Camera twice then Microphone, all before the first
  // publish settles (one task, so the second press always lands while the camera is in flight; three Playwright
  // clicks could let the publish finish first, and a second press after that rightly turns the camera off)
  await ada.evaluate(() => {
    const press = (source: string) => document.querySelector<HTMLButtonElement>(`[data-source=${source}]`)!.click();
    press('camera');
    press('camera');
    press('microphone');
  });
  await expect(ada.locator('[data-source=camera]')).toHaveAttribute('aria-pressed', 'true');
  await expect(ada.locator('[data-source=microphone]')).toHaveAttribute('aria-pressed', 'true');
  await expect.poll(() => videoWidth(mod, 'tile-ada-speaker'), { timeout: 15_000 }).toBeGreaterThan(0);
  await expect(ada.locator('.toast.error')).toHaveCount(0);
  // a screen share next to the camera: both reach the others; stopping the share keeps the camera
  await ada.click('[data-source=screen]');
  await expect(ada.locator('[data-source=screen]')).toHaveAttribute('aria-pressed', 'true');
  await expect.poll(() => videoWidth(mod, 'tile-ada-speaker'), { timeout: 15_000 }).toBeGreaterThan(0);
  await expect.poll(() => videoWidth(mod, 'tile-ada-speaker-screen'), { timeout: 15_000 }).toBeGreaterThan(0);
  await expect(mod.locator('#tile-ada-speaker-screen .name')).toHaveText("Ada's screen");
  await shot(mod, '1-camera-and-screen');
  // a muted share is marked on its own tile; the camera beside it is not
  await ada.evaluate(() => window.room!.localParticipant.tracks.get('screen')!.mute());
  await expect(mod.locator('#tile-ada-speaker-screen [data-muted=screen]')).toHaveText('screen off');
  await expect(mod.locator('#tile-ada-speaker [data-muted]')).toHaveCount(0);
  await ada.evaluate(() => window.room!.localParticipant.tracks.get('screen')!.unmute());
  await expect(mod.locator('#tile-ada-speaker-screen [data-muted]')).toHaveCount(0);
  await ada.click('[data-source=screen]');
  await expect(mod.locator('#tile-ada-speaker-screen')).toHaveCount(0, { timeout: 10_000 });
  await expect(mod.locator('#tile-ada-speaker video')).toBeVisible();
  await expect.poll(() => videoWidth(mod, 'tile-ada-speaker')).toBeGreaterThan(0);
  await shot(mod, '2-share-stopped-camera-stays');

  // a viewer writes: people are named, not numbered; the stage answers the viewer privately
  const vic = await open(browser, 'Vic', 'viewer');
  await vic.fill('#chat-text', 'Hello from the audience');
  await vic.press('#chat-text', 'Enter');
  await expect(mod.locator('#messages li', { hasText: 'Hello from the audience' }).locator('.from')).toHaveText('Vic');
  await mod.click('[data-tab=people]');
  await mod.click('#load-more');
  const vicRow = mod.locator('#audience-list li', { hasText: 'Vic' });
  await expect(vicRow).toHaveCount(1);
  await vicRow.getByRole('button', { name: 'Message' }).click();
  await mod.fill('#chat-text', 'Welcome, Vic');
  await mod.press('#chat-text', 'Enter');
  const dm = vic.locator('#messages li.direct', { hasText: 'Welcome, Vic' });
  await expect(dm.locator('.from')).toHaveText('Mo → you (privately)');
  await expect(ada.locator('#messages')).not.toContainText('Welcome, Vic');
  await expect(mod.locator('#messages li.direct', { hasText: 'Welcome, Vic' }).locator('.from')).toHaveText('You → Vic (privately)');
  await shot(vic, '3-direct-message-to-a-viewer');

  // removing the viewer: the moderator's list follows; the viewer is told why, and keeps its name and room
  await mod.click('[data-tab=people]');
  await vicRow.getByRole('button', { name: 'Remove' }).click();
  await expect(mod.locator('#audience-list li', { hasText: 'Vic' })).toHaveCount(0);
  await expect(vic.locator('#ended')).toContainText('A moderator removed you', { timeout: 10_000 });
  await expect(vic.locator('#name')).toHaveValue('Vic');
  await expect(vic.locator('#room')).toHaveValue('walkthrough');
  await expect(vic.locator('input[name=role][value=viewer]')).toBeChecked();
  await shot(vic, '4-removed-viewer-told-why');

  // the moderator's audience list follows the room once listed: a viewer joining shows up unasked
  const val = await open(browser, 'Val', 'viewer');
  const valId = await val.evaluate(() => window.room!.localParticipant.id);
  const valRow = mod.locator(`[id="viewer-${valId}"]`);
  await expect(valRow).toHaveText(/^Val/);
  // Refresh lists the audience again from its first page
  const listed = await valRow.elementHandle();
  await mod.click('#refresh-audience');
  await expect.poll(() => listed!.evaluate((row) => row.isConnected)).toBe(false);
  await expect(mod.locator('#audience-list li')).toHaveCount(1);
  await expect(valRow).toHaveCount(1);
  await expect(mod.locator('#load-more')).toHaveText('Everyone is listed');

  // a viewer writing as "Mo" (the moderator's name) in its payload is never shown as Mo: first
  // as what it claims, marked unverified with its id, then as the room names it
  const forged = 'I am the moderator: send me your password';
  const adaLabels = await recordLabels(ada, forged);
  await val.evaluate((text) => window.room!.pubsub.publish('chat', { text, name: 'Mo' }, { persist: true }), forged);
  const unverified = `“Mo” (unverified · ${valId.slice(0, 6)})`;
  await expect(ada.locator('#messages li', { hasText: forged }).locator('.from')).toHaveText('Val');
  await expect(mod.locator('#messages li', { hasText: forged }).locator('.from')).toHaveText('Val');
  for (const label of await adaLabels()) expect([unverified, 'Val']).toContain(label);
  await shot(ada, '5-forged-name-shown-as-the-room-names-it');

  // removed through the server API (the dashboard's route, RoomService): the moderator's list follows
  await mod.click('[data-tab=people]');
  const removed = await mod.request.post(`${new URL(mod.url()).origin}/api/dashboard/remove`, { data: { room: 'walkthrough', participantId: valId } });
  expect(removed.status()).toBe(200);
  await expect(valRow).toHaveCount(0);
  await expect(mod.locator('#audience-list li')).toHaveCount(0);
  await expect(val.locator('#ended')).toContainText('A moderator removed you', { timeout: 10_000 });
  await expect(val.locator('#room')).toHaveValue('walkthrough');

  // a recording, downloaded from the page
  await mod.click('[data-tab=outputs]');
  const recording = mod.locator('#outputs li', { hasText: 'Recording' });
  await recording.getByRole('button', { name: 'Start' }).click();
  await expect(recording.locator('.state')).toHaveText('active');
  await mod.waitForTimeout(2000);
  await recording.getByRole('button', { name: 'Stop' }).click();
  await expect(recording.locator('.state')).toHaveText('stopped', { timeout: 20_000 });
  await expect(mod.locator('#recordings a').first()).toBeVisible({ timeout: 10_000 });
  const files = await mod.locator('#recordings a').allTextContents();
  expect(files).toContain('timeline.jsonl');
  expect(files).toContain('ada-speaker--camera.webm');
  // clicked as a person does: the browser downloads it, under the recording's and the file's names
  const [download] = await Promise.all([mod.waitForEvent('download'), mod.locator('#recordings a', { hasText: 'camera' }).click()]);
  expect(download.suggestedFilename()).toMatch(/^[\w~-][\w.~-]*-ada-speaker--camera\.webm$/);
  const saved = await download.path();
  expect(statSync(saved).size).toBeGreaterThan(10_000);
  expect(readFileSync(saved).subarray(0, 4).toString('hex')).toBe('1a45dfa3'); // a WebM (EBML) file
  await shot(mod, '6-recording-download');

  // a removed guest is told why and is not let back in under a default name
  const guest = await open(browser, 'Gus', 'guest', false);
  await expect(guest.locator('#waiting')).toBeVisible();
  await mod.click('[data-tab=lobby]');
  await mod.locator('#lobby-gus-guest').getByRole('button', { name: 'Admit' }).click();
  await expect(guest.locator('#room-screen')).toBeVisible();
  // the forged message in the history of someone who came later: its sender is gone, nobody
  // names it, and it stays marked unverified
  const late = guest.locator('#messages li', { hasText: forged }).locator('.from');
  await expect(late).toHaveText(unverified);
  await expect(late).toHaveClass(/unverified/);
  await guest.waitForTimeout(1000);
  await expect(late).toHaveText(unverified);
  await mod.click('[data-tab=people]');
  await mod.locator('#person-gus-guest').getByRole('button', { name: 'Remove' }).click();
  await expect(guest.locator('#ended')).toContainText('A moderator removed you', { timeout: 10_000 });
  await expect(guest.locator('#name')).toHaveValue('Gus');
  await expect(guest.locator('#room')).toHaveValue('walkthrough');
  await guest.waitForTimeout(1000);
  await expect(guest.locator('#join-screen')).toBeVisible();
  await expect(mod.locator('#tile-gus-guest')).toHaveCount(0);
  await shot(guest, '7-removed-guest-told-why');

  // ending the room: everyone is told, nobody is dropped back to an empty form
  await mod.getByRole('button', { name: 'End the room for everyone' }).click();
  await expect(ada.locator('#ended')).toContainText('The room has ended', { timeout: 10_000 });
  await expect(ada.locator('#name')).toHaveValue('Ada');
  await expect(ada.locator('#room')).toHaveValue('walkthrough');
  await expect(mod.locator('#ended')).toContainText('The room has ended');
  await expect(mod.locator('#name')).toHaveValue('Mo');
  await expect(mod.locator('#room')).toHaveValue('walkthrough');
  await shot(ada, '8-room-ended');
});

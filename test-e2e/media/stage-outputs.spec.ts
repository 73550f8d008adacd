import { expect, test } from '@playwright/test';
import { stageDemo } from './stage-demo.ts';
import { speechLaunchOptions } from './speech.ts';

/**
 * Issue 13: `npm start`'s demo runs all five outputs out of the box (a local nginx RTMP server
 * for the livestream), and a viewer watches the room's HLS in the page with hls.js. The
 * moderator speaks through the fake microphone (espeak-ng).
 */
test.use({ launchOptions: speechLaunchOptions() });

const { open } = stageDemo('outputs-demo', { width: 1280, height: 900 });

const OUTPUTS = ['Recording', 'HLS', 'RTMP livestream', 'Transcription', 'Whiteboard'];

test('the demo: all five outputs start from the page, a viewer watches the HLS with hls.js, the recording is listed when stopped', async ({ browser }) => {
  test.setTimeout(120_000);
  const mod = await open(browser, 'Mo', 'moderator');
  await mod.evaluate(() => {
    for (const source of ['camera', 'microphone']) document.querySelector<HTMLButtonElement>(`[data-source=${source}]`)!.click();
  });
  await expect(mod.locator('[data-source=camera]')).toHaveAttribute('aria-pressed', 'true');
  await expect(mod.locator('[data-source=microphone]')).toHaveAttribute('aria-pressed', 'true');

  await mod.click('[data-tab=outputs]');
  // npm start's RTMP server is filled in for the livestream
  await expect(mod.locator('#rtmp-url')).toHaveValue(/^rtmp:\/\/127\.0\.0\.1:\d+\/live\/demo$/);
  for (const label of OUTPUTS) {
    const row = mod.locator('#outputs li', { hasText: label });
    await row.getByRole('button', { name: 'Start' }).click();
    await expect(row.locator('.state'), `${label} active`).toHaveText('active', { timeout: 30_000 });
  }
  await expect(mod.locator('.toast.error')).toHaveCount(0);

  // a viewer watches the room's HLS in the page
  const vic = await open(browser, 'Vic', 'viewer');
  await expect(vic.locator('#hls-panel')).toBeVisible();
  await vic.click('#hls-watch');
  const position = () => vic.evaluate(() => (document.getElementById('hls-video') as HTMLVideoElement).currentTime);
  await expect.poll(position, { timeout: 30_000, message: 'hls.js plays the live playlist' }).toBeGreaterThan(0);
  const first = await position();
  await expect.poll(position, { timeout: 15_000, message: 'and keeps playing' }).toBeGreaterThan(first + 1);
  await vic.screenshot({ path: 'test-results/stage-hls-viewer.png' });

  // the recording stops; its composite is listed for download
  await mod.locator('#outputs li', { hasText: 'Recording' }).getByRole('button', { name: 'Stop' }).click();
  await expect(mod.locator('#recordings a', { hasText: 'composite.mp4' })).toHaveCount(1, { timeout: 30_000 });
  for (const label of OUTPUTS.slice(1)) {
    const row = mod.locator('#outputs li', { hasText: label });
    await row.getByRole('button', { name: 'Stop' }).click();
    await expect(row.locator('.state')).toHaveText('stopped', { timeout: 20_000 });
  }
  await expect(mod.locator('.toast.error')).toHaveCount(0);
});

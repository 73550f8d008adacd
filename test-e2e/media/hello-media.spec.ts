import type { ChildProcess } from 'node:child_process';
import { startExample } from '../start-example.ts';
import { expect, test, type Page } from '@playwright/test';

/** The hello example with media, started by `npm start`'s script inside the namespace. */
let child: ChildProcess;
let web = '';

test.beforeAll(async () => {
  ({ child, web } = await startExample({ TESSERA_LOG_LEVEL: 'warn' }));
});
test.afterAll(() => child.kill('SIGTERM'));

async function joinAs(page: Page, name: string): Promise<void> {
  await page.goto(`${web}/examples/hello/`);
  await page.fill('#name', name);
  await page.fill('#room', 'hello-media');
  await page.click('button[type=submit]');
  await expect(page.locator('#in-room')).toBeVisible();
}

const playing = (page: Page, id: string) => page.evaluate((id) => (document.querySelector(`#${id} video`) as HTMLVideoElement | null)?.videoWidth ?? 0, id);

test('the hello page shows your preview and the other speaker\'s video', async ({ browser }) => {
  const ada = await (await browser.newContext()).newPage();
  const bob = await (await browser.newContext()).newPage();
  await joinAs(ada, 'Ada');
  await joinAs(bob, 'Bob');
  await ada.click('[data-source=camera]');
  await bob.click('[data-source=camera]');
  await expect(ada.locator('[data-source=camera]')).toHaveAttribute('aria-pressed', 'true');
  await expect.poll(() => playing(ada, 't-me-camera'), { timeout: 15_000 }).toBeGreaterThan(0);
  await expect.poll(() => playing(ada, 't-bob-speaker-camera'), { timeout: 15_000 }).toBeGreaterThan(0);
  await expect.poll(() => playing(bob, 't-ada-speaker-camera'), { timeout: 15_000 }).toBeGreaterThan(0);
  await ada.screenshot({ path: 'test-results/hello-media.png' });
  await ada.click('[data-source=camera]');
  await expect(bob.locator('#t-ada-speaker-camera')).toHaveCount(0);
});

import type { ChildProcess } from 'node:child_process';
import { startExample } from './start-example.ts';
import { expect, test } from '@playwright/test';

/** `npm start` itself (relay + token server + page), on free ports, driven like a person would. */
let child: ChildProcess;
let web = '';

test.beforeAll(async () => {
  ({ child, web } = await startExample({ TESSERA_LOG_LEVEL: 'warn' }));
});
test.afterAll(() => child.kill('SIGTERM'));

async function joinAs(page: import('@playwright/test').Page, name: string, role: string) {
  await page.goto(`${web}/examples/hello/`);
  await page.fill('#name', name);
  await page.fill('#room', 'hello-e2e');
  await page.selectOption('#role', role);
  await page.click('button[type=submit]');
  await expect(page.locator('#in-room')).toBeVisible();
}

test('the hello example: a speaker and a viewer see the same stage and counts; errors are shown as sentences', async ({ browser }) => {
  const ada = await (await browser.newContext()).newPage();
  const viewer = await (await browser.newContext()).newPage();
  await joinAs(ada, 'Ada', 'speaker');
  await joinAs(viewer, 'Vic', 'viewer');
  await expect(viewer.locator('#stage li')).toHaveText(['Ada']);
  await expect(ada.locator('#stage li')).toHaveCount(0);
  for (const page of [ada, viewer]) {
    await expect(page.locator('#c-speaker')).toHaveText('1');
    await expect(page.locator('#c-viewer')).toHaveText('1');
    await expect(page.locator('#c-total')).toHaveText('2');
  }
  await ada.click('#end');
  await expect(ada.locator('#error')).toContainText('Your role does not allow that. (Auth / INVALID_PERMISSIONS');
  await ada.screenshot({ path: 'test-results/hello-speaker.png', fullPage: true });

  const wrong = await (await browser.newContext()).newPage();
  await wrong.goto(`${web}/examples/hello/`);
  await wrong.fill('#password', 'nope');
  await wrong.click('button[type=submit]');
  await expect(wrong.locator('#error')).toContainText('wrong password');
});

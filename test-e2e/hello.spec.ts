import { spawn, type ChildProcess } from 'node:child_process';
import { expect, test } from '@playwright/test';

/** `npm start` itself (relay + token server + page), on free ports, driven like a person would. */
let child: ChildProcess;
let web = '';

test.beforeAll(async () => {
  child = spawn(process.execPath, ['scripts/start.mjs'], { env: { ...process.env, TESSERA_PORT: '0', PORT: '0' }, stdio: ['ignore', 'pipe', 'inherit'] });
  web = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c;
      const match = /token server: (http:\/\/\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`npm start exited ${code}: ${out}`)));
  });
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

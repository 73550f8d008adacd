import type { ChildProcess } from 'node:child_process';
import { expect, test, type Browser, type Page } from '@playwright/test';
import { startExample } from '../start-example.ts';

/**
 * The stage demo as people use it: `npm start`'s stack for the spec file (started before its
 * tests, stopped after), and `open()` to join a room from the demo's own join screen.
 */
export function stageDemo(room: string, viewport = { width: 1280, height: 800 }) {
  let child: ChildProcess | undefined;
  let web = '';
  test.beforeAll(async () => {
    ({ child, web } = await startExample({ TESSERA_LOG_LEVEL: 'warn' }));
  });
  test.afterAll(() => void child?.kill('SIGTERM'));
  return {
    /** Join `room` as `name` in `role`; waits for the room screen unless told not to (a guest waits in the lobby). */
    async open(browser: Browser, name: string, role: string, waitForRoom = true): Promise<Page> {
      const page = await (await browser.newContext({ viewport })).newPage();
      page.on('dialog', (dialog) => void dialog.accept());
      await page.goto(`${web}/examples/stage/`);
      await page.fill('#name', name);
      await page.fill('#room', room);
      await page.check(`input[name=role][value=${role}]`);
      await page.click('#join-button');
      if (waitForRoom) await expect(page.locator('#room-screen')).toBeVisible();
      return page;
    },
  };
}

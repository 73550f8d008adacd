import { defineConfig } from '@playwright/test';

/** Debian's Chromium, headless; Playwright never downloads a browser here. */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
  '--use-fake-device-for-media-stream',
  '--use-fake-ui-for-media-stream',
];

export default defineConfig({
  testDir: 'test-e2e',
  testMatch: '**/*.spec.ts',
  // media tests need a network namespace: playwright.media.config.ts, `npm test -- media`
  testIgnore: 'media/**',
  workers: 1,
  timeout: 30_000,
  retries: 0,
  reporter: [['list']],
  use: {
    headless: true,
    launchOptions: { executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', args: CHROMIUM_ARGS },
  },
});

import { defineConfig } from '@playwright/test';
import { CHROMIUM_ARGS } from './playwright.config.ts';

/**
 * Media tests: real Chromium sending and receiving WebRTC through the relay. They run inside a
 * network namespace made by `scripts/netns.sh` (Chromium gathers no candidates on loopback):
 * the relay announces 10.99.0.1 for media, signalling stays on 127.0.0.1.
 */
export default defineConfig({
  testDir: 'test-e2e/media',
  testMatch: '**/*.spec.ts',
  workers: 1,
  timeout: 60_000,
  retries: 0,
  reporter: [['list']],
  use: {
    headless: true,
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: [...CHROMIUM_ARGS, '--disable-features=WebRtcHideLocalIpsWithMdns', '--autoplay-policy=no-user-gesture-required'],
    },
  },
});

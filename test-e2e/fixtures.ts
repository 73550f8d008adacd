import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test as base, expect, type Page } from '@playwright/test';
import { startRelay, type Relay } from '../relay/server.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken, type MintOptions } from '../src/server/mint.ts';
import { serveStatic } from './static-server.ts';

export { serveStatic };

export const API_KEY = 'e2e-key';
export const SECRET = 'e2e-secret-0123456789abcdef';
type Claims = Omit<MintOptions, 'apiKey' | 'secret'> & Partial<Pick<MintOptions, 'apiKey' | 'secret'>>;

interface Fixtures {
  relay: Relay;
  origin: string;
  keys: KeyStore;
  token: (claims: Claims) => string;
}

/** Each test file gets a relay on a free port and a static server; `token` mints with the test key. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export const test = base.extend<{}, Fixtures>({
  keys: [async ({}, use) => use(new KeyStore({ [API_KEY]: SECRET, 'revoked-key': 'revoked-secret-0123456789' }, ['revoked-key'])), { scope: 'worker' }],
  relay: [
    async ({ keys }, use) => {
      const dir = mkdtempSync(join(tmpdir(), 'tessera-e2e-'));
      const outputs = { recordingsDir: join(dir, 'recordings'), hlsDir: join(dir, 'hls') };
      const relay = await startRelay({ port: 0, keys, logLevel: 'silent', countIntervalMs: 100, ...outputs, ...(process.env.TESSERA_E2E_MEDIA_IP ? { mediaIp: process.env.TESSERA_E2E_MEDIA_IP } : {}) });
      await use(relay);
      await relay.close();
      rmSync(dir, { recursive: true, force: true });
    },
    { scope: 'worker' },
  ],
  origin: [
    async ({}, use) => {
      const { server, origin } = await serveStatic();
      await use(origin);
      server.close();
    },
    { scope: 'worker' },
  ],
  token: [async ({}, use) => use((claims: Claims) => mintToken({ apiKey: API_KEY, secret: SECRET, ...claims })), { scope: 'worker' }],
});

export { expect };

/** Open a test page that loaded the SDK through the given bundle, as `window.Tessera`. */
export async function openSdkPage(page: Page, origin: string, bundle: 'iife' | 'esm' = 'iife'): Promise<void> {
  await page.goto(`${origin}/test-e2e/pages/${bundle}.html`);
  await page.waitForFunction(() => (window as unknown as { Tessera?: unknown }).Tessera !== undefined);
}

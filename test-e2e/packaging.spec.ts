import { build } from 'esbuild';
import { expect, test } from './fixtures.ts';

/**
 * The CJS build through a bundler: an application that `require`s the package by name,
 * bundled by esbuild for the browser, joins a room. (The ESM and script-tag builds are loaded
 * natively by `join.spec.ts`.)
 */
test('the CJS build, required by name and bundled by esbuild, joins a room in Chromium', async ({ page, origin, relay, token }) => {
  const result = await build({
    stdin: {
      contents: "window.Tessera = require('tessera');",
      resolveDir: new URL('..', import.meta.url).pathname,
      loader: 'js',
    },
    bundle: true,
    format: 'iife',
    platform: 'browser',
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const inputs = Object.keys(result.metafile.inputs);
  expect(inputs.some((f) => f.endsWith('dist/tessera.cjs'))).toBe(true);
  await page.goto(`${origin}/test-e2e/pages/blank.html`);
  await page.addScriptTag({ content: result.outputFiles[0]!.text });
  const joined = await page.evaluate(async ({ url, t }) => {
    const room = await window.Tessera.Sdk.join({ url, token: t });
    const id = room.id;
    await room.leave();
    return id;
  }, { url: relay.url, t: token({ roomId: 'cjs-bundle', grant: {} }) });
  expect(joined).toBe('cjs-bundle');
});

// `npm run size`: min and min+gzip of each SDK build, checked against the budget.
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { transformSync } from 'esbuild';

/**
 * The whole browser SDK, min+gzip, in bytes: 25 KB with media (issue 6's target; LiveKit's is
 * about 150 KB). The SDK before media had a budget of 10 KB.
 */
export const BUDGET = 25 * 1024;

const root = new URL('../packages/tessera/dist/', import.meta.url);
const builds = [
  ['tessera.mjs (ESM)', 'tessera.mjs', 'esm'],
  ['tessera.cjs (CJS)', 'tessera.cjs', 'cjs'],
  ['tessera.iife.min.js (script tag)', 'tessera.iife.min.js', null],
  ['tessera.browser.mjs (ES module for browsers, no bundler)', 'tessera.browser.mjs', 'esm'],
  ['server.mjs (tessera/server, Node)', 'server.mjs', 'esm'],
];

export function measure() {
  return builds.map(([label, file, format]) => {
    const source = readFileSync(new URL(file, root), 'utf8');
    const min = format ? transformSync(source, { minify: true, format, target: 'es2022' }).code : source;
    return { label, file, raw: Buffer.byteLength(source), min: Buffer.byteLength(min), gzip: gzipSync(min, { level: 9 }).length };
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = measure();
  const kb = (n) => `${(n / 1024).toFixed(2)} KB`;
  console.log('| build | raw | min | min+gzip |\n|---|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.label} | ${kb(r.raw)} | ${kb(r.min)} | ${kb(r.gzip)} |`);
  const sdk = rows.filter((r) => r.file.startsWith('tessera.'));
  const worst = Math.max(...sdk.map((r) => r.gzip));
  const ok = worst <= BUDGET;
  console.log(`size budget: the SDK is ${kb(worst)} min+gzip, budget ${kb(BUDGET)}: ${ok ? 'ok' : 'OVER BUDGET'}`);
  process.exit(ok ? 0 : 1);
}

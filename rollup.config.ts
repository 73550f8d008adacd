import { builtinModules } from 'node:module';
import type { RollupOptions } from 'rollup';
import { nodeResolve } from '@rollup/plugin-node-resolve';
import esbuild from 'rollup-plugin-esbuild';
import { readFileSync } from 'node:fs';

const node = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];
/** The SDK's runtime dependencies: imported by the ESM and CJS builds (the app's bundler dedupes them), bundled into the script tag. */
const pkg = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')) as { dependencies?: Record<string, string> };
const deps = Object.keys(pkg.dependencies ?? {});
const ts = (minify = false) => esbuild({ target: 'es2022', minify, sourceMap: true, legalComments: 'none' });

const config: RollupOptions[] = [
  {
    // the browser SDK: ESM and CJS for bundlers and Node, unminified with source maps
    input: 'src/index.ts',
    plugins: [ts()],
    external: deps,
    output: [
      { file: 'dist/tessera.mjs', format: 'es', sourcemap: true },
      { file: 'dist/tessera.cjs', format: 'cjs', sourcemap: true, exports: 'named' },
    ],
  },
  {
    // the script-tag bundle: global `Tessera`
    input: 'src/index.ts',
    plugins: [nodeResolve({ browser: true }), ts(true)],
    output: { file: 'dist/tessera.iife.min.js', format: 'iife', name: 'Tessera', sourcemap: true, exports: 'named' },
  },
  {
    // token minting for Node backends: `tessera/server`
    input: 'src/server/index.ts',
    plugins: [ts()],
    external: node,
    output: [
      { file: 'dist/server.mjs', format: 'es', sourcemap: true },
      { file: 'dist/server.cjs', format: 'cjs', sourcemap: true, exports: 'named' },
    ],
  },
  {
    // the relay behind `tessera-relay`
    input: 'relay/index.ts',
    plugins: [ts()],
    external: [...node, 'ws', 'werift'],
    output: { file: 'dist/relay.mjs', format: 'es', sourcemap: true },
  },
];

export default config;

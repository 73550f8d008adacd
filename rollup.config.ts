import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { nodeResolve } from '@rollup/plugin-node-resolve';
import type { RollupOptions } from 'rollup';
import esbuild from 'rollup-plugin-esbuild';

const node = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];
const ts = (minify = false) => esbuild({ target: 'es2022', minify, sourceMap: true, legalComments: 'none' });

/** The runtime dependencies of a workspace package: imported by its builds, never bundled into them. */
function dependencies(dir: string): string[] {
  const pkg = JSON.parse(readFileSync(new URL(`./packages/${dir}/package.json`, import.meta.url), 'utf8')) as { dependencies?: Record<string, string> };
  return Object.keys(pkg.dependencies ?? {});
}

const SDK = 'packages/tessera/dist';
const RELAY = 'packages/tessera-relay/dist';

const config: RollupOptions[] = [
  {
    // the browser SDK for bundlers and Node: ESM and CJS, unminified with source maps
    input: 'src/index.ts',
    plugins: [ts()],
    external: dependencies('tessera'),
    output: [
      { file: `${SDK}/tessera.mjs`, format: 'es', sourcemap: true },
      // 'auto': a dependency required here may be CJS (Node) or ESM with __esModule (a bundler)
      { file: `${SDK}/tessera.cjs`, format: 'cjs', sourcemap: true, exports: 'named', interop: 'auto' },
    ],
  },
  {
    // straight into a browser, no bundler: the script tag (global `Tessera`) and an ES module,
    // both with the dependencies inside
    input: 'src/index.ts',
    plugins: [nodeResolve({ browser: true }), ts(true)],
    output: [
      { file: `${SDK}/tessera.iife.min.js`, format: 'iife', name: 'Tessera', sourcemap: true, exports: 'named' },
      { file: `${SDK}/tessera.browser.mjs`, format: 'es', sourcemap: true },
    ],
  },
  {
    // token minting for Node backends: `tessera/server`
    input: 'src/server/index.ts',
    plugins: [ts()],
    external: node,
    output: [
      { file: `${SDK}/server.mjs`, format: 'es', sourcemap: true },
      { file: `${SDK}/server.cjs`, format: 'cjs', sourcemap: true, exports: 'named' },
    ],
  },
  {
    // the relay: `tessera-relay`
    input: 'relay/index.ts',
    plugins: [ts()],
    external: [...node, ...dependencies('tessera-relay')],
    output: { file: `${RELAY}/relay.mjs`, format: 'es', sourcemap: true },
  },
];

export default config;

// `npm run build`: the bundles (rollup) and the type declarations (tsc) of both packages.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const bin = (name) => join(root, 'node_modules/.bin', name);
const SDK = join(root, 'packages/tessera/dist');
const RELAY = join(root, 'packages/tessera-relay/dist');
for (const dir of [SDK, RELAY]) rmSync(dir, { recursive: true, force: true });
execFileSync(bin('rollup'), ['-c', 'rollup.config.ts', '--configPlugin', 'esbuild', '--silent'], { stdio: 'inherit', cwd: root });
execFileSync(bin('tsc'), ['-p', 'tsconfig.build.json'], { stdio: 'inherit', cwd: root });
execFileSync(bin('tsc'), ['-p', 'tsconfig.relay.build.json'], { stdio: 'inherit', cwd: root });

// The sources import with `.ts` extensions; published declarations must name `.js` (ESM) and,
// in a parallel `.d.cts` tree for `require`, `.cjs`.
const specifiers = /((?:from|import)\s*\(?\s*['"]\.{1,2}\/[^'"]*?)\.ts(['"])/g;
function rewrite(types, cjsTypes) {
  for (const entry of readdirSync(types, { recursive: true })) {
    const file = join(types, String(entry));
    if (!file.endsWith('.d.ts')) continue;
    const text = readFileSync(file, 'utf8');
    writeFileSync(file, text.replace(specifiers, '$1.js$2'));
    if (!cjsTypes) continue;
    const cjs = join(cjsTypes, String(entry).replace(/\.d\.ts$/, '.d.cts'));
    mkdirSync(dirname(cjs), { recursive: true });
    writeFileSync(cjs, text.replace(specifiers, '$1.cjs$2'));
  }
}
rewrite(join(SDK, 'types'), join(SDK, 'types-cjs'));
// the relay is ESM only
rewrite(join(RELAY, 'types'), null);

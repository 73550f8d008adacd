// `npm run build`: the bundles (rollup) and the type declarations (tsc).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const bin = (name) => join(root, 'node_modules/.bin', name);
rmSync(join(root, 'dist'), { recursive: true, force: true });
execFileSync(bin('rollup'), ['-c', 'rollup.config.ts', '--configPlugin', 'esbuild', '--silent'], { stdio: 'inherit', cwd: root });
execFileSync(bin('tsc'), ['-p', 'tsconfig.build.json'], { stdio: 'inherit', cwd: root });

// The sources import with `.ts` extensions; published declarations must name `.js` (ESM) and,
// in a parallel `.d.cts` tree for `require`, `.cjs`.
const specifiers = /((?:from|import)\s*\(?\s*['"]\.{1,2}\/[^'"]*?)\.ts(['"])/g;
for (const entry of readdirSync(join(root, 'dist/types'), { recursive: true })) {
  const file = join(root, 'dist/types', String(entry));
  if (!file.endsWith('.d.ts')) continue;
  const text = readFileSync(file, 'utf8');
  writeFileSync(file, text.replace(specifiers, '$1.js$2'));
  const cjs = join(root, 'dist/types-cjs', String(entry).replace(/\.d\.ts$/, '.d.cts'));
  mkdirSync(dirname(cjs), { recursive: true });
  writeFileSync(cjs, text.replace(specifiers, '$1.cjs$2'));
}

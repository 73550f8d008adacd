// `npm test`: everything CI runs. Stages: typecheck, build, unit, integration, size, package, docs, e2e, media.
// `npm test -- unit` (or integration, e2e, ...) runs only the named stages.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const bin = (name) => join(root, 'node_modules/.bin', name);
const totals = { passed: 0, failed: 0 };

function find(dir, suffix) {
  return readdirSync(join(root, dir), { recursive: true })
    .map(String)
    .filter((f) => f.endsWith(suffix) && !f.includes('node_modules'))
    .map((f) => join(dir, f))
    .sort();
}

/** Run a command, echoing its output; resolves with the output and exit code. */
function run(cmd, args, env = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const echo = (stream) => (chunk) => {
      out += chunk;
      stream.write(chunk);
    };
    child.stdout.on('data', echo(process.stdout));
    child.stderr.on('data', echo(process.stderr));
    child.on('close', (code) => resolve({ code: code ?? 1, out }));
  });
}

async function nodeTests(files) {
  const { code, out } = await run(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-concurrency=1', ...files]);
  const count = (name) => Number(new RegExp(`^ℹ ${name} (\\d+)`, 'm').exec(out)?.[1] ?? 0);
  totals.passed += count('pass');
  totals.failed += count('fail') + (code !== 0 && count('fail') === 0 ? 1 : 0);
  return code;
}

const stages = {
  typecheck: () => run(bin('tsc'), ['-p', 'tsconfig.json', '--noEmit']).then((r) => r.code),
  build: () => run(process.execPath, ['scripts/build.mjs']).then((r) => r.code),
  unit: () => nodeTests([...find('src', '.test.ts'), ...find('relay', '.test.ts')]),
  integration: () => nodeTests(find('test', '.test.ts')),
  size: () => run(process.execPath, ['scripts/size.mjs']).then((r) => r.code),
  // both packages as published: publint and "are the types wrong" on `npm pack`'s tarball of each
  package: async () => {
    for (const [dir, profile] of [['packages/tessera', 'node16'], ['packages/tessera-relay', 'esm-only']]) {
      const lint = await run(bin('publint'), ['--strict', dir]);
      if (lint.code !== 0) return lint.code;
      const types = await run(bin('attw'), ['--pack', dir, '--profile', profile]);
      if (types.code !== 0) return types.code;
    }
    return 0;
  },
  // the API reference: every public export documented (warnings are errors)
  docs: () => run(bin('typedoc'), []).then((r) => r.code),
  e2e: async () => {
    if (!existsSync(chromiumPath())) return missingChromium();
    return playwright(bin('playwright'), ['test']);
  },
  // WebRTC in Chromium needs a network namespace (see scripts/netns.sh): root and iproute2
  media: async () => {
    if (!existsSync(chromiumPath())) return missingChromium();
    return playwright(join(root, 'scripts/netns.sh'), [bin('playwright'), 'test', '--config', 'playwright.media.config.ts']);
  },
};

function chromiumPath() {
  return process.env.CHROMIUM_PATH || '/usr/bin/chromium';
}

function missingChromium() {
  console.error(`no Chromium at ${chromiumPath()}: install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH`);
  return 1;
}

async function playwright(cmd, args) {
  const { code, out } = await run(cmd, args, { PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: '1' });
  totals.passed += Number(/(\d+) passed/.exec(out)?.[1] ?? 0);
  totals.failed += Number(/(\d+) failed/.exec(out)?.[1] ?? 0) + (code !== 0 && !/\d+ failed/.test(out) ? 1 : 0);
  return code;
}

// what the run leaves in the temp directory is named at the end (every test removes its own)
const leftovers = () => new Set(readdirSync(tmpdir()).filter((n) => n.startsWith('tessera-')));
const tmpBefore = leftovers();

const wanted = process.argv.slice(2);
const names = wanted.length ? wanted : Object.keys(stages);
let failedStages = [];
for (const name of names) {
  if (!stages[name]) {
    console.error(`unknown stage ${name}; stages: ${Object.keys(stages).join(', ')}`);
    process.exit(2);
  }
  console.log(`\n=== ${name} ===`);
  const started = Date.now();
  const code = await stages[name]();
  console.log(`=== ${name}: ${code === 0 ? 'ok' : `FAILED (exit ${code})`} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (code !== 0) failedStages.push(name);
  if (code !== 0 && (name === 'typecheck' || name === 'build')) break;
}
const left = [...leftovers()].filter((n) => !tmpBefore.has(n));
console.log(`\ntemp directories left in ${tmpdir()}: ${left.length ? left.join(' ') : 'none'}`);
console.log(`stages failed: ${failedStages.length ? failedStages.join(', ') : 'none'}`);
console.log(`tests: ${totals.passed} passed, ${totals.failed} failed`);
process.exit(failedStages.length ? 1 : 0);

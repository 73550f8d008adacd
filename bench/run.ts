/**
 * `npm run bench`: the figures of bench/RESULTS.md, as markdown tables. Each measure runs
 * beside its floor in the same process and run, and reports the ratio.
 * `npm run bench -- join verify size` runs only those parts.
 */
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { benchJoin } from './join.ts';
import { benchVerify } from './verify.ts';

const parts: Record<string, () => Promise<string> | string> = {
  verify: benchVerify,
  join: () => benchJoin(Number(process.env.BENCH_JOINS ?? 1000)),
  size: () => execFileSync(process.execPath, ['scripts/size.mjs'], { encoding: 'utf8' }),
};

const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
console.log(`# Tessera benchmarks — ${new Date().toISOString()}`);
console.log(`node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}\n`);
for (const [name, run] of Object.entries(parts)) {
  if (wanted.length && !wanted.includes(name)) continue;
  console.log(`## ${name}\n`);
  console.log(await run());
  console.log('');
}
process.exit(0);

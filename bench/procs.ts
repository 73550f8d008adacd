/** Child processes of the benchmarks: start them, await their messages, ask them, stop them. */
import { fork, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

const here = fileURLToPath(new URL('.', import.meta.url));
const children = new Set<ChildProcess>();
let reaping = false;

/** Scripts whose processes run the code as it ships (see {@link shipped}). */
const SHIPPED = new Set(['server-child.ts']);
const bundles = new Map<string, string>();

/**
 * `bench/<script>` bundled by esbuild the way the package's build compiles the relay (rollup's
 * esbuild plugin: ES2022, names as JavaScript infers them), into `bench/.build/`, once a run.
 * Under tsx the relay ran other code than it ships: tsx compiles with esbuild's `keepNames`,
 * which wraps every named closure the relay makes (a request's scope, a frame's callback) in
 * `__name`, a `defineProperty` each: 3 % of what the relay allocated under `bench:hostile`.
 */
function shipped(script: string): string {
  let out = bundles.get(script);
  if (!out) {
    // one bundle per benchmark process (two at once must not fork each other's half-written file),
    // removed when it exits
    const path = `${here}.build/${script.replace(/\.ts$/, '')}.${process.pid}.mjs`;
    // packages stay imports (resolved from bench/.build/ up to the repository's node_modules)
    buildSync({ entryPoints: [`${here}${script}`], outfile: path, bundle: true, platform: 'node', format: 'esm', target: 'es2022', packages: 'external', logLevel: 'warning' });
    process.once('exit', () => rmSync(path, { force: true }));
    bundles.set(script, (out = path));
  }
  return out;
}

/**
 * Start `bench/<script>` under tsx with `--expose-gc`, or, for the servers (`server-child.ts`:
 * the relay and the floors beside it), as a bundle of the code as it ships (see
 * {@link shipped}). `BENCH_PROFILE=<first arg>` adds a CPU
 * profile (in `BENCH_PROFILE_DIR`) to the children started with that first argument;
 * `BENCH_TRACE_GC=1` makes the relay child print its garbage collections (`--trace-gc`); any other
 * value is taken as the relay child's V8 flags (e.g. `'--trace-gc --trace-incremental-marking'`).
 */
export function child(script: string, args: string[], env: Record<string, string> = {}): ChildProcess {
  if (!reaping) {
    // a benchmark that throws must not leave its relay and clients running (they skew the next run)
    reaping = true;
    process.on('exit', () => {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    });
  }
  const prof = process.env.BENCH_PROFILE && args[0] === process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR ?? '.'}`] : [];
  const [path, loader] = SHIPPED.has(script) ? [shipped(script), []] : [`${here}${script}`, ['--import', 'tsx']];
  const proc = fork(path, args, { execArgv: [...loader, '--expose-gc', ...prof, ...(args[0] === 'relay' && process.env.BENCH_TRACE_GC ? (process.env.BENCH_TRACE_GC === '1' ? ['--trace-gc'] : process.env.BENCH_TRACE_GC.split(' ')) : [])], env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return proc;
}

/** The next message of `proc` that `pick` accepts. */
export function message<T>(proc: ChildProcess, pick: (m: T) => boolean = () => true): Promise<T> {
  return new Promise<T>((resolve) => {
    const on = (m: T) => {
      if (!pick(m)) return;
      proc.off('message', on);
      resolve(m);
    };
    proc.on('message', on);
  });
}

let rid = 0;
/** Send `msg` with a fresh id; resolve with the answer carrying that id. */
export async function ask<T>(proc: ChildProcess, msg: Record<string, unknown>): Promise<T> {
  const id = ++rid;
  const answer = message<T & { id: number }>(proc, (m) => m.id === id);
  proc.send({ ...msg, id });
  return answer;
}

/** Ask a child to exit and wait until it has (so that profiles get written). */
export function stop(proc: ChildProcess): Promise<unknown> {
  return new Promise((resolve) => {
    proc.once('exit', resolve);
    proc.send({ cmd: 'exit' });
  });
}

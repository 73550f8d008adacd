/**
 * One ffmpeg process, owned: started with its output, stopped with it, and never outliving the
 * relay. Its death while wanted is a failure whose reason is the last lines ffmpeg wrote.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { Readable, Writable } from 'node:stream';

/** Lines of ffmpeg's stderr kept for the failure reason (the rest is never held). */
const TAIL_LINES = 12;
/** Longest stderr line kept. */
const LINE_CHARS = 400;

/**
 * `setpriv --pdeathsig KILL` (util-linux, in every Debian) makes the kernel kill ffmpeg when the
 * relay dies however it dies (SIGKILL, a crash), so no ffmpeg is left orphaned encoding a room.
 */
const SETPRIV = '/usr/bin/setpriv';

/** How an ffmpeg process ended. */
export interface FfmpegExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when it ended because it was asked to (`stop()`). */
  stopped: boolean;
  /** What went wrong, in ffmpeg's words (its last stderr lines), when it was not asked to stop. */
  reason: string;
}

/** Why ffmpeg could not run at all: not installed (`ffmpeg-missing`) or failed to spawn. */
export class FfmpegMissing extends Error {}

/** Options of {@link FfmpegProcess.start}. */
export interface FfmpegStart {
  /** The ffmpeg binary (`--ffmpeg`, default `ffmpeg` on `PATH`). */
  ffmpeg: string;
  /** Its arguments (`-hide_banner -nostdin` are added). */
  args: string[];
  /** Keep stdin open as a pipe (to feed it, or to send `q`); otherwise `-nostdin`. */
  stdin?: boolean;
  /** Receive what ffmpeg writes to stdout (e.g. `-progress pipe:1` or a muxer writing to `pipe:1`). */
  stdout?: (chunk: Buffer) => void;
  /** Called once with each complete stderr line (bounded). */
  stderrLine?: (line: string) => void;
}

/** The path of an executable: `name` itself when it has a slash, else the first match on `PATH`. */
export function findExecutable(name: string, path = process.env.PATH ?? ''): string | null {
  const candidates = name.includes('/') ? [name] : path.split(delimiter).filter(Boolean).map((dir) => join(dir, name));
  for (const file of candidates) {
    try {
      accessSync(file, constants.X_OK);
      if (statSync(file).isFile()) return file;
    } catch {
      // not here
    }
  }
  return null;
}

/** Every ffmpeg process of this relay, so that closing the relay stops them all. */
const running = new Set<FfmpegProcess>();

/** Stop every ffmpeg process this relay started (relay shutdown). */
export async function stopAllFfmpeg(): Promise<void> {
  await Promise.allSettled([...running].map((p) => p.stop()));
}

/** How many ffmpeg processes run now. */
export function runningFfmpeg(): number {
  return running.size;
}

export class FfmpegProcess {
  /** Resolves once the process has ended, however it ended. */
  readonly exited: Promise<FfmpegExit>;
  private readonly child: ChildProcess;
  private readonly tail: string[] = [];
  private partial = '';
  private stopping = false;
  private ended = false;

  private constructor(options: FfmpegStart) {
    const args = ['-hide_banner', ...(options.stdin ? [] : ['-nostdin']), ...options.args];
    const [command, argv] = existsSync(SETPRIV) ? [SETPRIV, ['--pdeathsig', 'KILL', '--', options.ffmpeg, ...args]] : [options.ffmpeg, args];
    this.child = spawn(command, argv, { stdio: [options.stdin ? 'pipe' : 'ignore', options.stdout ? 'pipe' : 'ignore', 'pipe'] });
    running.add(this);
    (this.child.stdout as Readable | null)?.on('data', (chunk: Buffer) => options.stdout?.(chunk));
    (this.child.stderr as Readable).on('data', (chunk: Buffer) => this.onStderr(chunk, options.stderrLine));
    // a pipe that fails to read is the end of what ffmpeg says, never an unhandled 'error' (its exit still comes)
    (this.child.stdout as Readable | null)?.on('error', () => undefined);
    (this.child.stderr as Readable).on('error', () => undefined);
    // a write to a stdin ffmpeg already closed must not become an unhandled error
    (this.child.stdin as Writable | null)?.on('error', () => undefined);
    this.exited = new Promise((resolve) => {
      let spawnError: Error | null = null;
      this.child.once('error', (err) => {
        spawnError = err;
        // no 'exit' follows a failed spawn
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' || this.child.pid === undefined) finish(null, null);
      });
      const finish = (code: number | null, signal: NodeJS.Signals | null) => {
        if (this.ended) return;
        this.ended = true;
        running.delete(this);
        if (this.partial) this.keep(this.partial);
        resolve({ code, signal, stopped: this.stopping, reason: spawnError ? spawnError.message : this.reason(code, signal) });
      };
      this.child.once('exit', (code, signal) => finish(code, signal));
    });
  }

  /**
   * Start ffmpeg. Rejects with {@link FfmpegMissing} when the binary is not there (checked by
   * running it, so that `PATH` lookups count); otherwise resolves once the process runs.
   */
  static async start(options: FfmpegStart): Promise<FfmpegProcess> {
    const binary = findExecutable(options.ffmpeg);
    if (!binary) throw new FfmpegMissing(`${options.ffmpeg} is not installed (Debian: apt-get install ffmpeg), or give its path with --ffmpeg`);
    const proc = new FfmpegProcess({ ...options, ffmpeg: binary });
    const spawned = await Promise.race([
      new Promise<true>((resolve) => proc.child.once('spawn', () => resolve(true))),
      proc.exited.then((exit) => exit),
    ]);
    if (spawned !== true) throw new FfmpegMissing(`cannot run ${binary}: ${spawned.reason}`);
    return proc;
  }

  /** The process id (for tests and the log). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** ffmpeg's last stderr lines. */
  lastLines(): string[] {
    return [...this.tail];
  }

  /** Write to its stdin (when started with `stdin`); false when it is not accepting (back-pressure or gone). */
  write(data: Buffer | string): boolean {
    const stdin = this.child.stdin;
    if (!stdin || stdin.destroyed || this.ended) return false;
    return stdin.write(data);
  }

  /**
   * Ask it to finish (`q` on stdin when it has one, so that muxers write their trailers, else
   * SIGINT, which ffmpeg also treats as "finish"), then SIGKILL after `graceMs`. Resolves once it
   * has ended.
   */
  async stop(graceMs = 5000): Promise<FfmpegExit> {
    if (!this.ended) {
      this.stopping = true;
      const stdin = this.child.stdin;
      if (stdin && !stdin.destroyed) {
        stdin.write('q');
        stdin.end();
      } else this.child.kill('SIGINT');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
      timer.unref();
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    }
    return this.exited;
  }

  private onStderr(chunk: Buffer, listener: ((line: string) => void) | undefined): void {
    // bounded: a partial line longer than the limit is cut, never accumulated
    const text = this.partial + chunk.toString('utf8');
    const lines = text.split(/\r?\n|\r/);
    this.partial = (lines.pop() ?? '').slice(-LINE_CHARS);
    for (const line of lines) {
      if (!line) continue;
      this.keep(line);
      listener?.(line.slice(0, LINE_CHARS));
    }
  }

  private keep(line: string): void {
    this.tail.push(line.slice(0, LINE_CHARS));
    if (this.tail.length > TAIL_LINES) this.tail.shift();
  }

  private reason(code: number | null, signal: NodeJS.Signals | null): string {
    const how = signal ? `killed by ${signal}` : `exit code ${code}`;
    const said = this.tail.slice(-3).join(' | ');
    return said ? `ffmpeg ended (${how}): ${said}` : `ffmpeg ended (${how})`;
  }
}

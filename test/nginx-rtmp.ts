/**
 * A real RTMP server for tests and the demo: Debian's `nginx` with `libnginx-mod-rtmp`, run
 * unprivileged with a configuration and prefix of its own in a private temporary directory,
 * listening on a free loopback port, in the foreground (`daemon off; master_process off;`) so
 * that it is one process this code owns and stops.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Where Debian puts nginx and the RTMP module. */
const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'];
const MODULES = ['/usr/lib/nginx/modules/ngx_rtmp_module.so', '/usr/share/nginx/modules/ngx_rtmp_module.so'];

/** The nginx binary and its RTMP module, or `null` when either is not installed. */
export function findNginxRtmp(): { nginx: string; module: string } | null {
  const nginx = NGINX.find((p) => existsSync(p));
  const module = MODULES.find((p) => existsSync(p));
  return nginx && module ? { nginx, module } : null;
}

/** Why RTMP tests are skipped here, or `false` when nginx with the RTMP module is installed. */
export function nginxRtmpMissing(): string | false {
  return findNginxRtmp() ? false : 'nginx with the RTMP module is not installed (apt-get install nginx-light libnginx-mod-rtmp)';
}

/** A running nginx RTMP server. */
export interface NginxRtmp {
  readonly port: number;
  /** `rtmp://127.0.0.1:PORT/live`, the `live` application: publish to and play from `${url}/${key}`. */
  readonly url: string;
  /** The URL of the stream `key` in the `live` application. */
  stream(key: string): string;
  /** nginx's own log lines (its stderr), for a test's failure message. */
  log(): string;
  /** Stop nginx (SIGKILL if it does not end at once) and remove its directory. */
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The configuration of one server: the `live` application, nothing recorded, no HTTP. */
function config(module: string, port: number): string {
  return [
    `load_module ${module};`,
    'daemon off;',
    'master_process off;',
    'worker_processes 1;',
    'error_log stderr warn;',
    'pid nginx.pid;',
    'events { worker_connections 128; }',
    'rtmp {',
    '  server {',
    `    listen 127.0.0.1:${port};`,
    '    chunk_size 4096;',
    '    application live { live on; record off; }',
    '  }',
    '}',
    '',
  ].join('\n');
}

/** Start nginx with the RTMP module on a free loopback port; resolves once it accepts connections. */
export async function startNginxRtmp(): Promise<NginxRtmp> {
  const found = findNginxRtmp();
  if (!found) throw new Error(nginxRtmpMissing() || 'nginx missing');
  const dir = mkdtempSync(join(tmpdir(), 'tessera-nginx-rtmp-'));
  const port = await freePort();
  writeFileSync(join(dir, 'nginx.conf'), config(found.module, port));
  let stderr = '';
  const child: ChildProcess = spawn(found.nginx, ['-c', join(dir, 'nginx.conf'), '-p', `${dir}/`, '-e', 'stderr'], { stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-8000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));
  const stop = async () => {
    if (!gone) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; i < 100 && !gone; i++) {
    if (await accepts(port)) {
      const url = `rtmp://127.0.0.1:${port}/live`;
      return { port, url, stream: (key) => `${url}/${key}`, log: () => stderr, stop };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  await stop();
  throw new Error(`nginx did not start: ${stderr}`);
}

/** What `ffprobe` sees of a live stream: its streams' codecs (sorted) and the video's size. */
export interface Probed {
  codecs: string[];
  width?: number;
  height?: number;
}

/**
 * `ffprobe` a live RTMP stream (as a player would open it from the server). Rejects when the
 * stream is not there or cannot be read within `ms` (ffprobe is killed then).
 */
export function probeRtmp(url: string, ms = 15_000): Promise<Probed> {
  return new Promise((resolve, reject) => {
    const child = spawn('ffprobe', ['-v', 'error', '-rw_timeout', String(ms * 1000), '-show_entries', 'stream=codec_name,width,height', '-of', 'json', url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`ffprobe ${url}: ${signal ?? `exit ${code}`} ${err.trim()}`));
      const { streams = [] } = JSON.parse(out || '{}') as { streams?: Array<{ codec_name: string; width?: number; height?: number }> };
      const video = streams.find((s) => s.width !== undefined);
      resolve({ codecs: streams.map((s) => s.codec_name).sort(), ...(video ? { width: video.width!, height: video.height! } : {}) });
    });
  });
}

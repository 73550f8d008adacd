import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * `npm start`'s script on free ports; resolves with the token server's URL once it is up. Its
 * dev-mode key and its outputs live in a temporary directory, removed when it exits.
 */
export async function startExample(env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; web: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-example-'));
  const own = { TESSERA_DEV_KEYS: join(dir, 'dev-keys.json'), TESSERA_RECORDINGS_DIR: join(dir, 'recordings'), TESSERA_HLS_DIR: join(dir, 'hls') };
  const child = spawn(process.execPath, ['scripts/start.mjs'], { env: { ...process.env, TESSERA_PORT: '0', PORT: '0', ...own, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  child.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const web = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c;
      const match = /token server: (http:\/\/\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`npm start exited ${code}: ${out}`)));
  });
  return { child, web, dir };
}

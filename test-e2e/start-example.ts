import { spawn, type ChildProcess } from 'node:child_process';

/** `npm start`'s script on free ports; resolves with the token server's URL once it is up. */
export async function startExample(env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; web: string }> {
  const child = spawn(process.execPath, ['scripts/start.mjs'], { env: { ...process.env, TESSERA_PORT: '0', PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  const web = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c;
      const match = /token server: (http:\/\/\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`npm start exited ${code}: ${out}`)));
  });
  return { child, web };
}

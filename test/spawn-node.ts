import { spawn, type ChildProcess } from 'node:child_process';

/** A relay node in its own process (so that a test can kill it), through the CLI run from source. */
export async function spawnNode(redis: string, keysFile: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/relay-node.ts', '--host', '127.0.0.1', '--port', '0', '--redis', redis, '--keys', keysFile, '--log-level', 'error'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`the node did not start: ${out}`)), 20_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /listening on (ws:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => reject(new Error(`the node exited (${code}): ${out}`)));
  });
  child.stdout!.resume();
  return { url, child };
}

// `npm start`: the relay (with a fresh key), the example token server and the demo page.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const relayPort = process.env.TESSERA_PORT ?? '7880';
const webPort = process.env.PORT ?? '8080';
const apiKey = 'demo';
const secret = randomBytes(24).toString('base64url');
const dir = mkdtempSync(join(tmpdir(), 'tessera-'));
const keysFile = join(dir, 'keys.json');
writeFileSync(keysFile, JSON.stringify({ keys: { [apiKey]: secret }, revoked: [] }), { mode: 0o600 });

const children = [];
function start(name, args, env, ready) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = ready.exec(out);
      if (match) resolve(match[1]);
    });
    child.on('exit', (code) => {
      reject(new Error(`${name} exited with ${code}`));
      shutdown(code ?? 1);
    });
  });
}

let stopping = false;
function shutdown(code = 0) {
  if (stopping) return;
  stopping = true;
  for (const child of children) child.kill('SIGTERM');
  setTimeout(() => process.exit(code), 500).unref();
}
process.on('SIGINT', () => shutdown(0));
process.on('SIGTERM', () => shutdown(0));

try {
  const relayUrl = await start('relay', ['bin/tessera-relay.mjs', '--keys', keysFile, '--port', relayPort], {}, /listening on (ws:\/\/\S+)/);
  const web = await start(
    'token-server',
    ['examples/token-server/server.mjs'],
    { TESSERA_API_KEY: apiKey, TESSERA_API_SECRET: secret, TESSERA_RELAY_URL: relayUrl, PORT: webPort },
    /listening on (http:\/\/\S+)/,
  );
  console.log(`\n  Tessera is running.\n  relay:        ${relayUrl}\n  token server: ${web}\n\n  Open ${web}/examples/stage/ in two browser windows (password: tessera).\n  The minimal example: ${web}/examples/hello/\n  Ctrl-C stops everything.\n`);
} catch (err) {
  console.error(`npm start: ${err.message}`);
  shutdown(1);
}

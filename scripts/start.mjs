// `npm start`: the relay in dev mode, the example token server (with its moderation dashboard,
// which receives the relay's webhooks) and the demo page. The relay's
// dev-mode key (kept in ~/.tessera/dev-keys.json, or TESSERA_DEV_KEYS) is the one
// `npx tessera token` signs with, so tokens from either work with this relay; the secret goes
// to the token server through its environment and is written nowhere else.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';

const root = new URL('..', import.meta.url).pathname;
const relayPort = process.env.TESSERA_PORT ?? '7880';

/** A free port now (for PORT=0): the relay must know the token server's address before it starts. */
function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer().once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(String(port)));
    });
  });
}
const webPort = (process.env.PORT ?? '8080') === '0' ? await freePort() : (process.env.PORT ?? '8080');
// the token server is the demo's webhook receiver (its dashboard lists the events); it runs on
// loopback, which the relay refuses as a webhook target unless allowed
const webhookArgs = ['--webhook-url', `http://127.0.0.1:${webPort}/api/webhooks`, '--allow-private-webhooks'];

const children = [];
function start(name, args, env, ready) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = ready.exec(out);
      if (match) resolve({ value: match[1], out });
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
  const relay = await start('relay', ['packages/tessera-relay/bin/tessera-relay.mjs', '--port', relayPort, ...webhookArgs], {}, /listening on (ws:\/\/\S+)/);
  const relayUrl = relay.value;
  const [, apiKey, secret] = /API key "([^"]+)", secret "([^"]+)"/.exec(relay.out) ?? [];
  if (!apiKey || !secret) throw new Error('the relay did not say its dev-mode key');
  const web = (
    await start(
      'token-server',
      ['examples/token-server/server.mjs'],
      { TESSERA_API_KEY: apiKey, TESSERA_API_SECRET: secret, TESSERA_RELAY_URL: relayUrl, PORT: webPort },
      /listening on (http:\/\/\S+)/,
    )
  ).value;
  console.log(`\n  Tessera is running.\n  relay:        ${relayUrl} (dev mode: \`npx tessera token\` signs for it too)\n  token server: ${web}\n\n  Open ${web}/examples/stage/ in two browser windows (password: tessera).\n  The minimal example: ${web}/examples/hello/\n  The moderation dashboard (server API and webhooks): ${web}/examples/dashboard/\n  Ctrl-C stops everything.\n`);
} catch (err) {
  console.error(`npm start: ${err.message}`);
  shutdown(1);
}

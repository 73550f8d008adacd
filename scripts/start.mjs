// `npm start`: the relay in dev mode, the example token server (with its moderation dashboard,
// which receives the relay's webhooks) and the demo page. The relay's
// dev-mode key (kept in ~/.tessera/dev-keys.json, or TESSERA_DEV_KEYS) is the one
// `npx tessera token` signs with, so tokens from either work with this relay; the secret goes
// to the token server through its environment and is written nowhere else.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { tsImport } from 'tsx/esm/api';

const root = new URL('..', import.meta.url).pathname;
const relayPort = process.env.TESSERA_PORT || '7880';

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

// the livestream output needs an RTMP server to push to: the demo runs a local one when Debian's
// nginx with the RTMP module is installed (the tests' own starter, test/nginx-rtmp.ts)
const { findNginxRtmp, startNginxRtmp } = await tsImport('../test/nginx-rtmp.ts', import.meta.url);
let rtmp = null;
if (findNginxRtmp()) {
  try {
    rtmp = await startNginxRtmp();
  } catch (err) {
    console.error(`npm start: the local RTMP server did not start (${err.message}); the livestream needs one`);
  }
}
const rtmpArgs = rtmp ? ['--allow-private-rtmp'] : [];
// a demo on a workstation: within a usual `ulimit -n`, so the relay has no file-descriptor warning to give
const demoLimits = ['--max-connections', '4096'];

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
      void shutdown(code ?? 1);
    });
  });
}

const exited = (child) => (child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once('exit', resolve)));

let stopping = false;
async function shutdown(code = 0) {
  if (stopping) return;
  stopping = true;
  for (const child of children) child.kill('SIGTERM');
  // nginx's stop removes its temporary directory, so it is waited for: exiting first left the
  // directory behind. Bounded: stop() kills nginx after 2 s, and a child that ignores SIGTERM
  // must not hold Ctrl-C up
  const bound = new Promise((resolve) => setTimeout(resolve, 3000).unref());
  await Promise.race([Promise.all([...children.map(exited), rtmp?.stop().catch((err) => console.error(`npm start: stopping the RTMP server: ${err.message}`))]), bound]);
  process.exit(code);
}
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

try {
  const relay = await start('relay', ['packages/tessera-relay/bin/tessera-relay.mjs', '--port', relayPort, ...demoLimits, ...webhookArgs, ...rtmpArgs], {}, /listening on (ws:\/\/\S+)/);
  const relayUrl = relay.value;
  const [, apiKey, secret] = /API key "([^"]+)", secret "([^"]+)"/.exec(relay.out) ?? [];
  if (!apiKey || !secret) throw new Error('the relay did not say its dev-mode key');
  const web = (
    await start(
      'token-server',
      ['examples/token-server/server.mjs'],
      { TESSERA_API_KEY: apiKey, TESSERA_API_SECRET: secret, TESSERA_RELAY_URL: relayUrl, PORT: webPort, ...(rtmp ? { TESSERA_DEMO_RTMP: rtmp.stream('demo') } : {}) },
      /listening on (http:\/\/\S+)/,
    )
  ).value;
  console.log(`\n  Tessera is running.\n  relay:        ${relayUrl} (dev mode: \`npx tessera token\` signs for it too)\n  token server: ${web}\n\n  Open ${web}/examples/stage/ in two browser windows (password: tessera).\n  The minimal example: ${web}/examples/hello/\n  The moderation dashboard (server API and webhooks): ${web}/examples/dashboard/\n  ${rtmp ? `RTMP server for the livestream: ${rtmp.url} (the demo streams to ${rtmp.stream('demo')}; watch: ffplay ${rtmp.stream('demo')})` : 'No local RTMP server: apt-get install nginx-light libnginx-mod-rtmp for the livestream demo'}\n  Ctrl-C stops everything.\n`);
} catch (err) {
  console.error(`npm start: ${err.message}`);
  void shutdown(1);
}

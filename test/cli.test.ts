import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { mintToken } from '../src/server/mint.ts';
import { nextEvent, rejectsWith } from './helpers.ts';
import { Sdk } from '../src/sdk.ts';

const BIN = new URL('../packages/tessera-relay/bin/tessera-relay.mjs', import.meta.url).pathname;
const TOOL = new URL('../packages/tessera/bin/tessera.mjs', import.meta.url).pathname;
// every file these tests write lives here (dev mode's key included: never the user's), removed at the end
const TMP = mkdtempSync(join(tmpdir(), 'tessera-cli-'));
const DEV_KEYS = join(TMP, 'dev-keys.json');
const children: ChildProcess[] = [];
after(() => {
  children.forEach((c) => c.kill('SIGKILL'));
  rmSync(TMP, { recursive: true, force: true });
});

/** Start the built relay command; resolves with its URL from the `listening on` line. */
function startCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; url: string; out: () => string }> {
  const child = spawn(process.execPath, [BIN, '--port', '0', '--log-level', 'warn', ...args], { env: { ...process.env, TESSERA_DEV_KEYS: DEV_KEYS, TESSERA_RECORDINGS_DIR: join(TMP, 'recordings'), TESSERA_HLS_DIR: join(TMP, 'hls'), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk;
      const match = /listening on (ws:\/\/[^\s]+)/.exec(out);
      if (match) resolve({ child, url: match[1]!, out: () => out });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => (out += c));
    child.once('exit', (code) => reject(new Error(`relay exited ${code}: ${out}`)));
  });
}

const exited = (child: ChildProcess) => new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

describe('tessera-relay command line', () => {
  it('dev mode: prints key devkey and its secret, listens on the real port with --port 0', async () => {
    const { child, url, out } = await startCli([]);
    assert.match(url, /^ws:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(url.endsWith(':0'), true);
    const secret = /secret "([^"]+)"/.exec(out())![1]!;
    const room = await Sdk.join({ url, token: mintToken({ apiKey: 'devkey', secret, roomId: 'cli', grant: {} }), reconnect: false });
    assert.equal(room.id, 'cli');
    const gone = nextEvent(room, 'disconnected');
    child.kill('SIGTERM');
    assert.deepEqual(await gone, { reason: 'server-shutdown' }, 'SIGTERM closes sessions with server-shutdown');
    assert.equal(await exited(child), 0, 'and exits 0');
  });

  it('--keys: SIGHUP re-reads the file; a revoked or removed key is refused for new joins at once', async () => {
    const dir = mkdtempSync(join(TMP, 'keys-'));
    const file = join(dir, 'keys.json');
    writeFileSync(file, JSON.stringify({ keys: { a: 'secret-a-0123456789', b: 'secret-b-0123456789' }, revoked: [] }));
    const { child, url } = await startCli(['--keys', file]);
    const token = (apiKey: string, secret: string) => mintToken({ apiKey, secret, roomId: 'k', grant: {} });
    const live = await Sdk.join({ url, token: token('a', 'secret-a-0123456789') });
    await (await Sdk.join({ url, token: token('b', 'secret-b-0123456789') })).leave();
    writeFileSync(file, JSON.stringify({ keys: { a: 'secret-a-0123456789' }, revoked: ['a'] }));
    child.kill('SIGHUP');
    const deadline = Date.now() + 3000;
    let code = '';
    while (Date.now() < deadline) {
      try {
        (await Sdk.join({ url, token: token('a', 'secret-a-0123456789') })).leave();
      } catch (err) {
        code = (err as { code: string }).code;
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(code, 'INVALID_API_KEY', 'revoked key refused');
    await rejectsWith(Sdk.join({ url, token: token('b', 'secret-b-0123456789') }), 'INVALID_API_KEY');
    assert.equal(live.connected, true, 'sessions already in keep going');
    child.kill('SIGTERM');
    assert.equal(await exited(child), 0);
  });

  it('--keys with projects: each project\'s keys open their own rooms; tessera token signs with a project key, never a revoked one', async () => {
    const dir = mkdtempSync(join(TMP, 'keys-'));
    const file = join(dir, 'keys.json');
    const projects = { acme: { keys: { 'acme-1': 'secret-acme-0123456789' }, revoked: ['acme-0'] }, globex: { keys: { 'globex-1': 'secret-globex-0123456789', 'globex-0': 'secret-globex-old-0123' }, revoked: ['globex-0'] } };
    writeFileSync(file, JSON.stringify({ projects }));
    const { child, url } = await startCli(['--keys', file]);
    const token = (args: string[]) =>
      new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
        const p = spawn(process.execPath, [TOOL, 'token', '--keys', file, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        p.stdout.on('data', (c: Buffer) => (out += c));
        p.stderr.on('data', (c: Buffer) => (err += c));
        p.on('exit', (code) => resolve({ code, out, err }));
      });
    const acme = await Sdk.join({ url, token: (await token(['--key', 'acme-1', '--room', 'same', '--identity', 'a'])).out.trim() });
    const globex = await Sdk.join({ url, token: (await token(['--key', 'globex-1', '--room', 'same', '--identity', 'g'])).out.trim() });
    assert.equal(acme.participantCount.total, 1, 'two projects, two rooms called "same"');
    assert.equal(globex.participantCount.total, 1);
    const revoked = await token(['--key', 'globex-0', '--room', 'same']);
    assert.equal(revoked.code, 2);
    assert.match(revoked.err, /revoked/);
    await acme.leave();
    await globex.leave();
    child.kill('SIGTERM');
    await exited(child);
  });

  it('tessera token signs with the dev-mode key: its tokens join a dev-mode relay', async () => {
    const { child, url } = await startCli([]);
    const run = (args: string[]) =>
      new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
        const p = spawn(process.execPath, [TOOL, 'token', ...args], { env: { ...process.env, TESSERA_DEV_KEYS: DEV_KEYS }, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        p.stdout.on('data', (c: Buffer) => (out += c));
        p.stderr.on('data', (c: Buffer) => (err += c));
        p.on('exit', (code) => resolve({ code, out, err }));
      });
    const minted = await run(['--room', 'cli-token', '--identity', 'ada', '--grant', 'canPublish,canSubscribe', '--sources', 'camera', '--ttl', '15m']);
    assert.equal(minted.code, 0, minted.err);
    const room = await Sdk.join({ url, token: minted.out.trim() });
    assert.equal(room.localParticipant.id, 'ada');
    assert.deepEqual(room.localParticipant.grant.canPublishSources, ['camera']);
    assert.equal(room.localParticipant.grant.canPublish, true);
    await room.leave();
    const viewer = await run(['--viewer', '--grant', 'canSubscribe']);
    const v = await Sdk.join({ url, token: viewer.out.trim(), roomId: 'cli-token' });
    assert.equal(v.localParticipant.isViewer, true);
    await v.leave();
    const ask = await run(['--room', 'r', '--ask', '30']);
    assert.equal(ask.code, 0);
    assert.equal((await run(['--grant', 'canFly'])).code, 2, 'unknown flag');
    const refused = await run(['--grant', 'canModerate']);
    assert.equal(refused.code, 2, 'refused at mint: privileged flag without a room');
    assert.match(refused.err, /roomId/);
    child.kill('SIGTERM');
    await exited(child);
  });

  it('a promise nobody handled (a library\'s) is a fault logged and counted, not the end of every room', async () => {
    // rejected once the command has set itself up (its listener is there), as a library's promise would be
    const planted = 'const t=setInterval(()=>{if(process.listenerCount("unhandledRejection")){clearInterval(t);Promise.reject(new Error("planted-by-the-test"))}},50)';
    const { child, url, out } = await startCli([], { NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(planted)}` });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(child.exitCode, null, `the relay lives: ${out()}`);
    assert.ok(out().includes('planted-by-the-test'), 'the rejection happened');
    assert.match(out(), /fault: a promise rejected and nobody handled it.*planted-by-the-test/);
    const metrics = await (await fetch(`${url.replace('ws:', 'http:')}/metrics`)).text();
    assert.match(metrics, /^tessera_faults_total 1$/m);
    child.kill('SIGTERM');
    await exited(child);
  });

  it('environment variables set flags; --help lists them; bad flags exit 2', async () => {
    const { child, url } = await startCli([], { TESSERA_HOST: '127.0.0.1', TESSERA_COUNT_INTERVAL: '50' });
    assert.match(url, /127\.0\.0\.1/);
    child.kill('SIGTERM');
    await exited(child);
    const help = spawn(process.execPath, [BIN, '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    help.stdout.on('data', (c: Buffer) => (text += c));
    assert.equal(await exited(help), 0);
    for (const flag of ['--host', '--port', '--keys', '--max-ttl-room', '--max-ttl-domain', '--media-ip', '--count-interval', '--heap-growth', 'TESSERA_PORT']) assert.ok(text.includes(flag), flag);
    const bad = spawn(process.execPath, [BIN, '--bogus'], { stdio: 'ignore' });
    assert.equal(await exited(bad), 2);
    const badPort = spawn(process.execPath, [BIN, '--port', 'x'], { stdio: 'ignore' });
    assert.equal(await exited(badPort), 2);
    const badGrowth = spawn(process.execPath, [BIN, '--heap-growth', '5000'], { stdio: 'ignore' });
    assert.equal(await exited(badGrowth), 2);
    // media would be received on an address this host does not have: refused at the start, not at a member's publish
    const foreign = spawn(process.execPath, [BIN, '--port', '0', '--media-ip', '198.51.100.7'], { env: { ...process.env, TESSERA_DEV_KEYS: DEV_KEYS }, stdio: ['ignore', 'pipe', 'pipe'] });
    let said = '';
    foreign.stderr!.on('data', (c: Buffer) => (said += c));
    assert.notEqual(await exited(foreign), 0);
    assert.match(said, /--media-ip 198\.51\.100\.7 is not an address of this host/);
  });
});

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { loadOrCreateDevKeys } from './dev-keys.ts';

describe('dev keys', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-dev-keys-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('created on first use, owner-only, and read as it is afterwards', () => {
    const env = { TESSERA_DEV_KEYS: join(dir, 'sub', 'dev-keys.json') };
    const first = loadOrCreateDevKeys(env);
    assert.equal(first.apiKey, 'devkey');
    assert.ok(first.secret.length >= 16);
    assert.equal(statSync(env.TESSERA_DEV_KEYS).mode & 0o777, 0o600);
    assert.deepEqual(loadOrCreateDevKeys(env), first);
  });

  it('a file without a usable devkey (a keys file of your own) or not JSON is an error naming it, and is left as it is', () => {
    const cases = {
      'projects.json': JSON.stringify({ projects: { acme: { keys: { live_key: 'a-live-secret-of-the-integrator' } } } }),
      'short.json': JSON.stringify({ keys: { devkey: 'short' } }),
      'null.json': 'null',
      'broken.json': '{"keys":',
    };
    for (const [name, text] of Object.entries(cases)) {
      const path = join(dir, name);
      writeFileSync(path, text);
      assert.throws(() => loadOrCreateDevKeys({ TESSERA_DEV_KEYS: path }), (err: Error) => err.message.includes(path), name);
      assert.equal(readFileSync(path, 'utf8'), text, `${name} left as it was`);
    }
  });
});

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';

/** The built package as a consumer sees it: resolved by name through the exports map. */
describe('the built package', () => {
  it('imports as ESM and requires as CJS in Node, touching no window or document', async () => {
    const g = globalThis as Record<string, unknown>;
    assert.equal(g.window, undefined);
    assert.equal(g.document, undefined);
    const esm = (await import('tessera')) as Record<string, unknown>;
    const cjs = createRequire(import.meta.url)('tessera') as Record<string, unknown>;
    for (const mod of [esm, cjs]) {
      for (const name of ['Sdk', 'SdkError', 'ErrorKind', 'ErrorCode', 'Room', 'RemoteParticipant', 'LocalParticipant']) assert.ok(mod[name], name);
      assert.equal((mod.ErrorCode as Record<string, string>).INVALID_TOKEN, 'INVALID_TOKEN');
      assert.ok(Object.isFrozen(mod.ErrorKind));
    }
  });

  it('tessera/server mints tokens, in ESM and CJS', async () => {
    const esm = (await import('tessera/server')) as { mintToken: (o: unknown) => string };
    const cjs = createRequire(import.meta.url)('tessera/server') as { mintToken: (o: unknown) => string };
    for (const { mintToken } of [esm, cjs]) {
      const token = mintToken({ apiKey: 'k', secret: 's'.repeat(20), roomId: 'r', grant: {} });
      assert.equal(token.split('.').length, 3);
    }
  });

  it('the declarations are where the exports map says, types first, one tree for import and one for require', async () => {
    const { readFileSync, existsSync } = await import('node:fs');
    const pkg = JSON.parse(readFileSync(new URL('../packages/tessera/package.json', import.meta.url), 'utf8')) as { exports: Record<string, string | Record<string, Record<string, string>>>; sideEffects: boolean };
    assert.equal(pkg.sideEffects, false);
    for (const [path, entry] of Object.entries(pkg.exports)) {
      if (typeof entry === 'string') continue;
      for (const [condition, target] of Object.entries(entry)) {
        assert.equal(Object.keys(target)[0], 'types', `${path} ${condition}: types first`);
        for (const file of Object.values(target)) assert.ok(existsSync(new URL(`../packages/tessera/${file}`, import.meta.url)), file);
      }
      assert.match(entry.require!.types!, /\.d\.cts$/);
    }
  });

  it('one package per audience: the browser package depends only on what the browser needs', async () => {
    const { readFileSync } = await import('node:fs');
    const read = (dir: string) => JSON.parse(readFileSync(new URL(`../packages/${dir}/package.json`, import.meta.url), 'utf8')) as { dependencies?: Record<string, string>; bin?: Record<string, string> };
    assert.deepEqual(Object.keys(read('tessera').dependencies ?? {}).sort(), ['jwt-decode', 'mitt']);
    const relay = read('tessera-relay');
    for (const dep of ['ws', 'werift']) assert.ok(relay.dependencies?.[dep], dep);
    assert.ok(relay.bin?.['tessera-relay']);
    const root = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { private?: boolean; dependencies?: Record<string, string> };
    assert.equal(root.private, true, 'the workspace root is never published');
    assert.equal(root.dependencies, undefined, 'the root carries no runtime dependencies');
  });

  it('the relay package imports by name and starts a relay', async () => {
    const { startRelay, KeyStore } = await import('tessera-relay');
    const relay = await startRelay({ port: 0, host: '127.0.0.1', keys: new KeyStore({ k: 's'.repeat(32) }), media: null });
    assert.match(relay.url, /^ws:\/\/127\.0\.0\.1:\d+/);
    await relay.close();
  });

  it('published declarations carry no @internal member', async () => {
    const { readdirSync, readFileSync } = await import('node:fs');
    for (const dir of ['packages/tessera/dist', 'packages/tessera-relay/dist']) {
      const root = new URL(`../${dir}/`, import.meta.url);
      const files = readdirSync(root, { recursive: true }).map(String).filter((f) => f.endsWith('.d.ts') || f.endsWith('.d.cts'));
      assert.ok(files.length > 5, dir);
      for (const file of files) assert.doesNotMatch(readFileSync(new URL(file, root), 'utf8'), /@internal/, `${dir}/${file}`);
    }
    const outputs = readFileSync(new URL('../packages/tessera/dist/types/outputs/outputs.d.ts', import.meta.url), 'utf8');
    assert.doesNotMatch(outputs, /changed\(/, 'OutputControl.changed (internal) is not published');
  });
});

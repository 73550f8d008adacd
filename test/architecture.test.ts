import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

/**
 * The parts and the direction of their dependencies, read off the import statements:
 * src/protocol ← src/ (SDK) and relay/; no import cycles.
 */
const ROOT = new URL('..', import.meta.url).pathname;

interface Edge {
  to: string;
  typeOnly: boolean;
}

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .map((f) => join(dir, f));
}

const IMPORT = /^\s*(?:import|export)\s+(type\s+)?(?:[^'";]*?\s+from\s+)?'([^']+)'/gm;

function graph(files: string[]): Map<string, Edge[]> {
  const out = new Map<string, Edge[]>();
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    const edges: Edge[] = [];
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[2]!;
      const typeOnly = m[1] !== undefined;
      edges.push({ to: spec.startsWith('.') ? relative(ROOT, resolve(ROOT, dirname(file), spec)) : spec, typeOnly });
    }
    out.set(file, edges);
  }
  return out;
}

/** Every cycle of the graph (one per back edge), following type-only imports too when asked. */
function cycles(g: Map<string, Edge[]>, typesToo: boolean): string[] {
  const found: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    stack.push(file);
    for (const { to, typeOnly } of g.get(file) ?? []) {
      if ((typeOnly && !typesToo) || !g.has(to)) continue;
      if (state.get(to) === 'open') found.push([...stack.slice(stack.indexOf(to)), to].join(' → '));
      else if (!state.has(to)) visit(to);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of g.keys()) if (!state.has(file)) visit(file);
  return found;
}

const sdk = graph(sources('src'));
const relay = graph(sources('relay'));
const all = new Map([...sdk, ...relay]);

describe('architecture: one direction of dependency, no cycles (issue 12)', () => {
  it('reads the imports (a sanity check of this test itself)', () => {
    const edges = [...all.values()].flat();
    assert.ok(edges.length > 300, `${edges.length} imports read`);
    assert.ok(sdk.get('src/room.ts')!.some((e) => e.to === 'src/connection.ts'));
    const loop = new Map<string, Edge[]>([
      ['a', [{ to: 'b', typeOnly: false }]],
      ['b', [{ to: 'a', typeOnly: true }]],
    ]);
    assert.deepEqual(cycles(loop, false), []);
    assert.deepEqual(cycles(loop, true), ['a → b → a']);
  });

  it('the protocol imports nothing outside itself: no package, no SDK, no relay', () => {
    for (const [file, edges] of sdk) {
      if (!file.startsWith('src/protocol/')) continue;
      for (const { to } of edges) assert.ok(to.startsWith('src/protocol/'), `${file} imports ${to}`);
    }
  });

  it('the SDK never imports the relay; its runtime packages are the declared ones', () => {
    const allowed = new Set(['mitt', 'jwt-decode']);
    for (const [file, edges] of sdk) {
      for (const { to, typeOnly } of edges) {
        assert.ok(!to.startsWith('relay/'), `${file} imports ${to}`);
        if (to.startsWith('src/') || typeOnly || to.startsWith('node:')) continue;
        assert.ok(allowed.has(to), `${file} imports the package ${to}`);
      }
    }
  });

  it("the relay imports the protocol, never the SDK's runtime (only the dev-key file's location, plain Node)", () => {
    for (const [file, edges] of relay) {
      for (const { to } of edges) {
        if (!to.startsWith('src/')) continue;
        assert.ok(to.startsWith('src/protocol/') || to === 'src/server/dev-keys.ts', `${file} imports ${to}`);
      }
    }
  });

  it('no import cycle anywhere, type-only imports included', () => {
    assert.deepEqual(cycles(all, true), []);
  });
});

/**
 * What the cluster tests that kill or stop nodes share: a keys file for nodes in their own
 * processes (`spawn-node.ts`), a webhook receiver as an integrator's backend would run it, and
 * the teardown of all of it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A private temp directory with a keys file of one API key; `remove()` deletes it. */
export function keysDir(prefix: string, apiKey: string, secret: string): { dir: string; keysFile: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), `tessera-${prefix}-`));
  const keysFile = join(dir, 'keys.json');
  writeFileSync(keysFile, JSON.stringify({ keys: { [apiKey]: secret } }));
  return { dir, keysFile, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A local HTTP receiver of webhooks: every event it got, in the order it got them (answered 204). */
export interface WebhookSink<T> {
  readonly told: T[];
  /** Listen on a free loopback port. */
  start(): Promise<void>;
  /** The relay options that send a node's webhooks here. */
  options(): { webhookUrl: string; allowPrivateWebhooks: true };
  stop(): void;
}

export function webhookSink<T>(): WebhookSink<T> {
  const told: T[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      told.push(JSON.parse(Buffer.concat(chunks).toString()) as T);
      res.writeHead(204).end();
    });
  });
  return {
    told,
    start: () => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve)),
    options: () => ({ webhookUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, allowPrivateWebhooks: true }),
    stop() {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** What a cluster test started, stopped in order; the keys directory goes even if a stop fails. */
export async function tearDown(parts: {
  rooms: ReadonlyArray<{ leave(): Promise<unknown> }>;
  children: ReadonlyArray<{ kill(signal: NodeJS.Signals): unknown }>;
  nodes: ReadonlyArray<{ close(): Promise<unknown> }> | undefined;
  redis: { stop(): Promise<unknown> } | undefined;
  sink: { stop(): void };
  keys: { remove(): void } | undefined;
}): Promise<void> {
  try {
    for (const room of parts.rooms) void room.leave().catch(() => undefined);
    for (const child of parts.children) child.kill('SIGKILL');
    await Promise.all((parts.nodes ?? []).map((n) => n.close()));
    await parts.redis?.stop();
    parts.sink.stop();
  } finally {
    parts.keys?.remove();
  }
}

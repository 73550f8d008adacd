import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** The API key of dev mode. */
export const DEV_API_KEY = 'devkey';

/** Where dev mode keeps its key: `TESSERA_DEV_KEYS`, else `~/.tessera/dev-keys.json`. */
export function devKeysPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.TESSERA_DEV_KEYS || join(homedir(), '.tessera', 'dev-keys.json');
}

/**
 * The dev-mode key, created on first use (readable by its owner only) so that the relay and
 * `tessera token` agree without anyone copying a secret. The file has the keys-file format.
 */
export function loadOrCreateDevKeys(env: NodeJS.ProcessEnv = process.env): { apiKey: string; secret: string; path: string } {
  const path = devKeysPath(env);
  if (existsSync(path)) {
    const data = JSON.parse(readFileSync(path, 'utf8')) as { keys?: Record<string, string> };
    const secret = data.keys?.[DEV_API_KEY];
    if (typeof secret === 'string' && secret.length >= 16) return { apiKey: DEV_API_KEY, secret, path };
  }
  const secret = randomBytes(24).toString('base64url');
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, JSON.stringify({ keys: { [DEV_API_KEY]: secret }, revoked: [] }, null, 2), { mode: 0o600 });
  chmodSync(path, 0o600);
  return { apiKey: DEV_API_KEY, secret, path };
}

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
 * `tessera token` agree without anyone copying a secret. The file has the keys-file format. A
 * file already there is never overwritten: one that is not JSON or has no usable `devkey` (a
 * keys file of your own, given by mistake) is an error naming it.
 */
export function loadOrCreateDevKeys(env: NodeJS.ProcessEnv = process.env): { apiKey: string; secret: string; path: string } {
  const path = devKeysPath(env);
  if (existsSync(path)) return { apiKey: DEV_API_KEY, secret: devSecretIn(path), path };
  const secret = randomBytes(24).toString('base64url');
  mkdirSync(dirname(path), { recursive: true });
  try {
    // created only if still missing: a file made meanwhile (the relay and `tessera token` at once) is read
    writeFileSync(path, JSON.stringify({ keys: { [DEV_API_KEY]: secret }, revoked: [] }, null, 2), { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return { apiKey: DEV_API_KEY, secret: devSecretIn(path), path };
    throw err;
  }
  chmodSync(path, 0o600);
  return { apiKey: DEV_API_KEY, secret, path };
}

function devSecretIn(path: string): string {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`the dev keys file ${path} cannot be read as JSON (${(err as Error).message}): fix or remove it, or set TESSERA_DEV_KEYS to another path`);
  }
  const secret = (data as { keys?: Record<string, unknown> } | null)?.keys?.[DEV_API_KEY];
  if (typeof secret === 'string' && secret.length >= 16) return secret;
  throw new Error(`the dev keys file ${path} has no "${DEV_API_KEY}" key of 16 characters or more: it is left as it is; remove it, or set TESSERA_DEV_KEYS to another path`);
}

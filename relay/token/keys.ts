import { createSecretKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isRecord } from '../../src/protocol/parse.ts';

/** Where an API key stands. */
export type KeyStatus = { state: 'active'; key: KeyObject } | { state: 'revoked' } | { state: 'unknown' };

/**
 * The API keys the relay accepts, each secret pre-imported as an HMAC key object so that a
 * verification does not re-import it. Replaced whole on reload.
 */
export class KeyStore {
  private keys = new Map<string, KeyObject>();
  private revoked = new Set<string>();

  constructor(keys: Record<string, string> = {}, revoked: Iterable<string> = []) {
    this.replace(keys, revoked);
  }

  /** Replace every key at once (a reload). */
  replace(keys: Record<string, string>, revoked: Iterable<string> = []): void {
    const next = new Map<string, KeyObject>();
    for (const [apiKey, secret] of Object.entries(keys)) next.set(apiKey, createSecretKey(Buffer.from(secret, 'utf8')));
    this.keys = next;
    this.revoked = new Set(revoked);
  }

  /** Look an API key up. A revoked key is revoked even if its secret is still listed. */
  status(apiKey: string): KeyStatus {
    if (this.revoked.has(apiKey)) return { state: 'revoked' };
    const key = this.keys.get(apiKey);
    return key ? { state: 'active', key } : { state: 'unknown' };
  }

  /** True while the key may be used for new joins. */
  isActive(apiKey: string): boolean {
    return this.status(apiKey).state === 'active';
  }

  get size(): number {
    return this.keys.size;
  }
}

/** The parsed content of a `--keys` file. */
export interface KeysFile {
  keys: Record<string, string>;
  revoked: string[];
}

/**
 * Read and check a keys file: `{ "keys": { "<apiKey>": "<secret>" }, "revoked": [...] }`.
 * Throws an `Error` naming the file and the problem.
 */
export function readKeysFile(path: string): KeysFile {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read keys file ${path}: ${(err as Error).message}`);
  }
  if (!isRecord(data) || !isRecord(data.keys)) throw new Error(`keys file ${path}: "keys" must be an object`);
  const keys: Record<string, string> = {};
  for (const [apiKey, secret] of Object.entries(data.keys)) {
    if (typeof secret !== 'string' || secret.length < 16) {
      throw new Error(`keys file ${path}: the secret of "${apiKey}" must be a string of at least 16 characters`);
    }
    keys[apiKey] = secret;
  }
  const revoked = data.revoked ?? [];
  if (!Array.isArray(revoked) || !revoked.every((k) => typeof k === 'string')) {
    throw new Error(`keys file ${path}: "revoked" must be an array of strings`);
  }
  return { keys, revoked };
}

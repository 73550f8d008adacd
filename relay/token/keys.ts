import { createSecretKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isRecord } from '../../src/protocol/parse.ts';

/** The project of the flat keys-file form and of dev mode. */
export const DEFAULT_PROJECT = 'default';

/** Where an API key stands; an active key names the project it signs for. */
export type KeyStatus = { state: 'active'; key: KeyObject; project: string } | { state: 'revoked' } | { state: 'unknown' };

/** One project's keys: rotations of one application's secret, sharing its rooms. */
export interface ProjectKeys {
  keys: Record<string, string>;
  revoked: string[];
  /** Where the relay POSTs this project's webhooks (else `--webhook-url`). */
  webhookUrl?: string;
  /** Send `participant-joined` / `participant-left` for the audience too (off: on-stage only). */
  webhookViewers?: boolean;
}

/** What the relay needs to send a project's webhooks. */
export interface ProjectHooks {
  webhookUrl?: string;
  webhookViewers: boolean;
  /** The API key webhooks are signed with (`iss`) and its secret: the project's first active key. */
  signer: { apiKey: string; key: KeyObject } | null;
}

/**
 * The API keys the relay accepts, grouped by project, each secret pre-imported as an HMAC key
 * object so that a verification does not re-import it. Replaced whole on reload.
 */
export class KeyStore {
  private keys = new Map<string, { key: KeyObject; project: string }>();
  private revoked = new Set<string>();
  private projects = new Map<string, ProjectHooks>();

  /** One project (`default`): the flat form of the keys file. */
  constructor(keys: Record<string, string> = {}, revoked: Iterable<string> = []) {
    this.replace(keys, revoked);
  }

  /** Replace every key at once with one project's (the flat form). */
  replace(keys: Record<string, string>, revoked: Iterable<string> = []): void {
    this.replaceProjects({ [DEFAULT_PROJECT]: { keys, revoked: [...revoked] } });
  }

  /** Replace every key at once (a reload). An API key may belong to one project only. */
  replaceProjects(projects: Record<string, ProjectKeys>): void {
    const next = new Map<string, { key: KeyObject; project: string }>();
    const revoked = new Set<string>();
    for (const [project, entry] of Object.entries(projects)) {
      for (const [apiKey, secret] of Object.entries(entry.keys)) {
        if (next.has(apiKey)) throw new Error(`API key "${apiKey}" is listed in two projects`);
        next.set(apiKey, { key: createSecretKey(Buffer.from(secret, 'utf8')), project });
      }
      for (const apiKey of entry.revoked) revoked.add(apiKey);
    }
    const hooks = new Map<string, ProjectHooks>();
    for (const [project, entry] of Object.entries(projects)) {
      const apiKey = Object.keys(entry.keys).find((k) => !revoked.has(k));
      hooks.set(project, {
        ...(entry.webhookUrl ? { webhookUrl: entry.webhookUrl } : {}),
        webhookViewers: entry.webhookViewers === true,
        signer: apiKey === undefined ? null : { apiKey, key: next.get(apiKey)!.key },
      });
    }
    this.keys = next;
    this.revoked = revoked;
    this.projects = hooks;
  }

  /** A project's webhook settings and signing key, as of the last (re)load. */
  hooks(project: string): ProjectHooks | undefined {
    return this.projects.get(project);
  }

  /** Look an API key up. A revoked key is revoked even if its secret is still listed. */
  status(apiKey: string): KeyStatus {
    if (this.revoked.has(apiKey)) return { state: 'revoked' };
    const entry = this.keys.get(apiKey);
    return entry ? { state: 'active', key: entry.key, project: entry.project } : { state: 'unknown' };
  }

  /** True while the key may be used for new joins. */
  isActive(apiKey: string): boolean {
    return this.status(apiKey).state === 'active';
  }

  get size(): number {
    return this.keys.size;
  }

  /** Projects of the last (re)load. */
  get projectCount(): number {
    return this.projects.size;
  }
}

/** The parsed content of a `--keys` file: always as projects (the flat form is `default`). */
export interface KeysFile {
  projects: Record<string, ProjectKeys>;
  /** Every revoked key, of every project. */
  revoked: string[];
}

const PROJECT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

function readProject(path: string, where: string, data: Record<string, unknown>): ProjectKeys {
  if (!isRecord(data.keys)) throw new Error(`keys file ${path}: ${where}"keys" must be an object`);
  const keys: Record<string, string> = {};
  for (const [apiKey, secret] of Object.entries(data.keys)) {
    if (typeof secret !== 'string' || secret.length < 16) {
      throw new Error(`keys file ${path}: the secret of "${apiKey}" must be a string of at least 16 characters`);
    }
    keys[apiKey] = secret;
  }
  const revoked = data.revoked ?? [];
  if (!Array.isArray(revoked) || !revoked.every((k) => typeof k === 'string')) {
    throw new Error(`keys file ${path}: ${where}"revoked" must be an array of strings`);
  }
  const webhookUrl = data.webhookUrl;
  if (webhookUrl !== undefined && (typeof webhookUrl !== 'string' || !/^https?:\/\/[^/@\s]+(\/\S*)?$/i.test(webhookUrl))) throw new Error(`keys file ${path}: ${where}"webhookUrl" must be an http:// or https:// URL`);
  const webhookViewers = data.webhookViewers;
  if (webhookViewers !== undefined && typeof webhookViewers !== 'boolean') throw new Error(`keys file ${path}: ${where}"webhookViewers" must be true or false`);
  return { keys, revoked, ...(webhookUrl ? { webhookUrl } : {}), ...(webhookViewers ? { webhookViewers } : {}) };
}

/**
 * Read and check a keys file, in either form:
 * `{ "keys": { "<apiKey>": "<secret>" }, "revoked": [...] }` (one project, `default`), or
 * `{ "projects": { "<name>": { "keys": {...}, "revoked": [...], "webhookUrl"?: "...", "webhookViewers"?: true } } }`
 * (the flat form may carry `webhookUrl` and `webhookViewers` too).
 * Throws an `Error` naming the file and the problem.
 */
export function readKeysFile(path: string): KeysFile {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read keys file ${path}: ${(err as Error).message}`);
  }
  if (!isRecord(data)) throw new Error(`keys file ${path}: must be a JSON object`);
  const projects: Record<string, ProjectKeys> = {};
  if (data.projects !== undefined) {
    if (!isRecord(data.projects)) throw new Error(`keys file ${path}: "projects" must be an object`);
    if (data.keys !== undefined) throw new Error(`keys file ${path}: use either "projects" or "keys", not both`);
    for (const [name, entry] of Object.entries(data.projects)) {
      if (!PROJECT_NAME.test(name)) throw new Error(`keys file ${path}: project name "${name.slice(0, 80)}" must be 1-64 letters, digits, . _ -`);
      if (!isRecord(entry)) throw new Error(`keys file ${path}: project "${name}" must be an object`);
      projects[name] = readProject(path, `project "${name}": `, entry);
    }
  } else {
    projects[DEFAULT_PROJECT] = readProject(path, '', data);
  }
  const seen = new Set<string>();
  for (const [name, project] of Object.entries(projects)) {
    for (const apiKey of Object.keys(project.keys)) {
      if (seen.has(apiKey)) throw new Error(`keys file ${path}: API key "${apiKey}" is listed twice (project "${name}")`);
      seen.add(apiKey);
    }
  }
  return { projects, revoked: Object.values(projects).flatMap((p) => p.revoked) };
}

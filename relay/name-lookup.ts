/**
 * The names of remote servers the relay connects to for its users (webhook receivers, RTMP
 * targets), resolved without holding libuv's thread pool. `dns.lookup` runs the system's
 * resolver on that pool, and only half of it may resolve names: a project whose webhook host's
 * name server never answered held those threads about 10 s a lookup, and every other project's
 * webhooks (and every livestream start) waited behind them. Here a name is looked up in the
 * hosts file (read by the relay itself), then asked of the DNS servers through c-ares
 * (asynchronous, no thread) within a deadline; only a name the DNS says it does not know goes on
 * to `dns.lookup` (for search domains and the system's other sources), one such lookup at a
 * time relay-wide, so that at most one of the pool's threads is ever ours.
 */
import { lookup, Resolver } from 'node:dns/promises';
import { readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';

/** One address of a name. */
export interface NameAddress {
  address: string;
  family: 4 | 6;
}

/** How long one query waits for its answer (ms; one try a server), and a whole lookup at most. */
const QUERY_TIMEOUT_MS = 1500;
const LOOKUP_DEADLINE_MS = 5000;
/** How often the hosts file is looked at for a change (ms), and the largest read. */
const HOSTS_CHECK_MS = 5000;
const MAX_HOSTS_BYTES = 1024 * 1024;

/** Answers that say the DNS has no such name (or there is no name server): the system's other sources may know it. */
const ASK_SYSTEM = new Set(['ENOTFOUND', 'ENODATA', 'ECONNREFUSED']);

let servers: string[] | null = null;
let hostsPath = '/etc/hosts';
let hosts: { mtimeMs: number; size: number; checkedAt: number; names: Map<string, NameAddress[]> } | null = null;
/** Whether a `dns.lookup` of ours is running (it holds a thread of the pool until the system answers). */
let systemBusy = false;

/** Ask these DNS servers (`"127.0.0.1:5353"`) and read this hosts file from now on, or the system's again (`null`). For tests. */
export function useNameServers(next: readonly string[] | null, hostsFile: string | null = null): void {
  servers = next ? [...next] : null;
  hostsPath = hostsFile ?? '/etc/hosts';
  hosts = null;
}

/** A name that does not resolve: `code` is why (`ETIMEOUT`, `ENOTFOUND`, `EBUSY`, …). */
export class NameLookupError extends Error {
  override readonly name = 'NameLookupError';
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/** The hosts file's names, read again when it changed (looked at once in {@link HOSTS_CHECK_MS}). */
function hostsFile(): Map<string, NameAddress[]> {
  const now = Date.now();
  if (hosts && now - hosts.checkedAt < HOSTS_CHECK_MS) return hosts.names;
  let names = new Map<string, NameAddress[]>();
  try {
    const stat = statSync(hostsPath);
    if (hosts && stat.mtimeMs === hosts.mtimeMs && stat.size === hosts.size) {
      hosts.checkedAt = now;
      return hosts.names;
    }
    if (stat.size <= MAX_HOSTS_BYTES) names = parseHosts(readFileSync(hostsPath, 'utf8'));
    hosts = { mtimeMs: stat.mtimeMs, size: stat.size, checkedAt: now, names };
  } catch {
    hosts = { mtimeMs: -1, size: -1, checkedAt: now, names };
  }
  return names;
}

function parseHosts(text: string): Map<string, NameAddress[]> {
  const names = new Map<string, NameAddress[]>();
  for (const line of text.split('\n')) {
    const [address, ...aliases] = line.replace(/#.*/, '').trim().split(/\s+/);
    const family = address ? isIP(address) : 0;
    if (!address || !family) continue;
    for (const alias of aliases) {
      const key = alias.toLowerCase();
      const list = names.get(key) ?? [];
      if (!list.some((a) => a.address === address)) list.push({ address, family: family === 6 ? 6 : 4 });
      names.set(key, list);
    }
  }
  return names;
}

const codeOf = (result: PromiseSettledResult<string[]>) => (result.status === 'fulfilled' ? 'ENODATA' : String((result.reason as { code?: unknown }).code ?? 'EUNKNOWN'));

/** `work` within `ms`, or `onLate()` and a rejection with `ETIMEOUT`. */
function within<T>(work: Promise<T>, ms: number, onLate: () => void): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onLate();
      reject(new NameLookupError(`the name did not resolve within ${ms} ms`, 'ETIMEOUT'));
    }, ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** The name's addresses from the DNS servers, through c-ares. */
async function askDns(name: string): Promise<NameAddress[]> {
  const resolver = new Resolver({ timeout: QUERY_TIMEOUT_MS, tries: 1 });
  if (servers) resolver.setServers(servers);
  const both = Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
  const [v4, v6] = await within(both, LOOKUP_DEADLINE_MS, () => resolver.cancel());
  const found: NameAddress[] = [];
  if (v4.status === 'fulfilled') for (const address of v4.value) found.push({ address, family: 4 });
  if (v6.status === 'fulfilled') for (const address of v6.value) found.push({ address, family: 6 });
  if (found.length > 0) return found;
  const codes = [codeOf(v4), codeOf(v6)];
  const failed = codes.find((code) => !ASK_SYSTEM.has(code));
  if (failed) throw new NameLookupError(`the name does not resolve (${failed})`, failed);
  return [];
}

/** The system's resolver (`dns.lookup`): one of ours at a time, as it holds a thread of the pool until it answers. */
async function askSystem(name: string): Promise<NameAddress[]> {
  if (systemBusy) throw new NameLookupError('the name does not resolve (another lookup of the system resolver is running)', 'EBUSY');
  systemBusy = true;
  const running = lookup(name, { all: true, verbatim: true });
  void running.catch(() => undefined).finally(() => (systemBusy = false));
  try {
    const answers = await within(running, LOOKUP_DEADLINE_MS, () => undefined);
    return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
  } catch (err) {
    if (err instanceof NameLookupError) throw err;
    throw new NameLookupError('the name does not resolve', String((err as { code?: unknown }).code ?? 'ENOTFOUND'));
  }
}

/**
 * Every address of `host`: an IP literal is its own address; then the hosts file's (in its
 * order), `localhost` and its subdomains as loopback (RFC 6761), the DNS's (IPv4 first), and
 * last the system resolver's. Rejects with a {@link NameLookupError}, within about
 * 5 s for the DNS and 5 s for the system resolver however they behave.
 */
export async function lookupName(host: string): Promise<NameAddress[]> {
  const literal = isIP(host);
  if (literal) return [{ address: host, family: literal === 6 ? 6 : 4 }];
  const name = host.toLowerCase().replace(/\.$/, '');
  const listed = hostsFile().get(name);
  if (listed) return listed;
  if (name === 'localhost' || name.endsWith('.localhost')) return [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }];
  const found = await askDns(name);
  return found.length > 0 ? found : askSystem(name);
}

/**
 * The names of remote servers the relay connects to for its users (webhook receivers, RTMP
 * targets), resolved without libuv's thread pool. `dns.lookup` runs the system's resolver on
 * that pool, and only half of it may resolve names: a project whose webhook host's name server
 * never answers held those threads about 10 s a lookup, and every other project's webhooks (and
 * every livestream start) waited behind them. Here names go to the DNS servers through c-ares
 * (asynchronous, no thread), with a deadline; only a name the DNS says does not exist, or a
 * machine without a name server, goes on to `dns.lookup` (the hosts file), which then answers
 * at once.
 */
import { lookup, Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';

/** One address of a name. */
export interface NameAddress {
  address: string;
  family: 4 | 6;
}

/** How long one query waits for its answer (ms), and how many times it is sent. */
const QUERY_TIMEOUT_MS = 1500;
const QUERY_TRIES = 2;

/** Answers that say quickly that the DNS has no such name (or there is no name server): the hosts file may know it. */
const ASK_HOSTS_FILE = new Set(['ENOTFOUND', 'ENODATA', 'ECONNREFUSED']);

let resolver = new Resolver({ timeout: QUERY_TIMEOUT_MS, tries: QUERY_TRIES });

/** Ask these DNS servers (`"127.0.0.1:5353"`) from now on, or the system's again (`null`). For tests. */
export function useNameServers(servers: readonly string[] | null): void {
  resolver = new Resolver({ timeout: QUERY_TIMEOUT_MS, tries: QUERY_TRIES });
  if (servers) resolver.setServers([...servers]);
}

/** A name that does not resolve: `code` is the DNS's answer (`ETIMEOUT`, `ENOTFOUND`, …). */
export class NameLookupError extends Error {
  override readonly name = 'NameLookupError';
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

const codeOf = (result: PromiseSettledResult<string[]>) => (result.status === 'fulfilled' ? 'ENODATA' : String((result.reason as { code?: unknown }).code ?? 'EUNKNOWN'));

/**
 * Every address of `host` (an IP literal is its own address; `localhost` and its subdomains
 * are loopback, RFC 6761): IPv4 ones first. Rejects with a {@link NameLookupError} within
 * about 5 s however the DNS behaves (c-ares waits longer on each try).
 */
export async function lookupName(host: string): Promise<NameAddress[]> {
  const literal = isIP(host);
  if (literal) return [{ address: host, family: literal === 6 ? 6 : 4 }];
  const name = host.toLowerCase().replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }];
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
  const found: NameAddress[] = [];
  if (v4.status === 'fulfilled') for (const address of v4.value) found.push({ address, family: 4 });
  if (v6.status === 'fulfilled') for (const address of v6.value) found.push({ address, family: 6 });
  if (found.length > 0) return found;
  const codes = [codeOf(v4), codeOf(v6)];
  const slow = codes.find((code) => !ASK_HOSTS_FILE.has(code));
  if (slow) throw new NameLookupError(`the name does not resolve (${slow})`, slow);
  try {
    const answers = await lookup(name, { all: true, verbatim: true });
    return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
  } catch (err) {
    throw new NameLookupError('the name does not resolve', String((err as { code?: unknown }).code ?? 'ENOTFOUND'));
  }
}
